#include "json.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace iez::json {

class Parser {
public:
  explicit Parser(const std::string& t) : t_(t) {}

  Value document()
  {
    Value v = value(0);
    ws();
    if (i_ != t_.size())
      fail("unexpected text after the JSON value");
    return v;
  }

private:
  const std::string& t_;
  size_t i_ = 0;

  [[noreturn]] void fail(const std::string& msg) const
  {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < t_.size(); k++) {
      if (t_[k] == '\n') {
        line++;
        col = 1;
      } else {
        col++;
      }
    }
    throw Error("bad JSON at line " + std::to_string(line) + " column " + std::to_string(col) + ": " + msg);
  }

  void ws()
  {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t'))
      i_++;
  }

  bool literal(const char* word)
  {
    size_t n = std::char_traits<char>::length(word);
    if (t_.compare(i_, n, word) != 0)
      return false;
    i_ += n;
    return true;
  }

  Value value(int depth)
  {
    if (depth > 64)
      fail("nesting deeper than 64 levels");
    ws();
    if (i_ >= t_.size())
      fail("unexpected end of input");
    Value v;
    char c = t_[i_];
    if (c == '{') {
      v.type_ = Value::Type::Object;
      i_++;
      ws();
      if (i_ < t_.size() && t_[i_] == '}') {
        i_++;
        return v;
      }
      while (true) {
        ws();
        if (i_ >= t_.size() || t_[i_] != '"')
          fail("expected a string key");
        std::string k = string();
        ws();
        if (i_ >= t_.size() || t_[i_] != ':')
          fail("expected ':'");
        i_++;
        v.o_[k] = value(depth + 1);
        ws();
        if (i_ < t_.size() && t_[i_] == ',') {
          i_++;
          continue;
        }
        if (i_ < t_.size() && t_[i_] == '}') {
          i_++;
          return v;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.type_ = Value::Type::Array;
      i_++;
      ws();
      if (i_ < t_.size() && t_[i_] == ']') {
        i_++;
        return v;
      }
      while (true) {
        v.a_.push_back(value(depth + 1));
        ws();
        if (i_ < t_.size() && t_[i_] == ',') {
          i_++;
          continue;
        }
        if (i_ < t_.size() && t_[i_] == ']') {
          i_++;
          return v;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.type_ = Value::Type::String;
      v.s_    = string();
      return v;
    }
    if (literal("true")) {
      v.type_ = Value::Type::Bool;
      v.b_    = true;
      return v;
    }
    if (literal("false")) {
      v.type_ = Value::Type::Bool;
      return v;
    }
    if (literal("null"))
      return v;
    if (c == '-' || (c >= '0' && c <= '9')) {
      const char* start = t_.c_str() + i_;
      char* end         = nullptr;
      double d          = std::strtod(start, &end);
      if (end == start || !std::isfinite(d))
        fail("bad number");
      i_ += static_cast<size_t>(end - start);
      v.type_ = Value::Type::Number;
      v.n_    = d;
      return v;
    }
    fail(std::string("unexpected character '") + c + "'");
  }

  std::string string()
  {
    i_++;  // opening quote
    std::string s;
    while (i_ < t_.size()) {
      char c = t_[i_++];
      if (c == '"')
        return s;
      if (static_cast<unsigned char>(c) < 0x20)
        fail("control character in a string");
      if (c != '\\') {
        s += c;
        continue;
      }
      if (i_ >= t_.size())
        break;
      char e = t_[i_++];
      switch (e) {
        case '"': s += '"'; break;
        case '\\': s += '\\'; break;
        case '/': s += '/'; break;
        case 'b': s += '\b'; break;
        case 'f': s += '\f'; break;
        case 'n': s += '\n'; break;
        case 'r': s += '\r'; break;
        case 't': s += '\t'; break;
        case 'u': {
          if (i_ + 4 > t_.size())
            fail("short \\u escape");
          unsigned cp = static_cast<unsigned>(std::strtoul(t_.substr(i_, 4).c_str(), nullptr, 16));
          i_ += 4;
          // Names in our files are ASCII; other code points are kept as UTF-8 (BMP only).
          if (cp < 0x80) {
            s += static_cast<char>(cp);
          } else if (cp < 0x800) {
            s += static_cast<char>(0xC0 | (cp >> 6));
            s += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            s += static_cast<char>(0xE0 | (cp >> 12));
            s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            s += static_cast<char>(0x80 | (cp & 0x3F));
          }
          break;
        }
        default: fail("bad escape in a string");
      }
    }
    fail("unterminated string");
  }
};

Value Value::parse(const std::string& text)
{
  return Parser(text).document();
}

static const char* type_name(Value::Type t)
{
  switch (t) {
    case Value::Type::Null: return "null";
    case Value::Type::Bool: return "a boolean";
    case Value::Type::Number: return "a number";
    case Value::Type::String: return "a string";
    case Value::Type::Array: return "an array";
    case Value::Type::Object: return "an object";
  }
  return "?";
}

static void need(const Value& v, Value::Type t, const std::string& what)
{
  if (v.type() != t)
    throw Error(what + ": expected " + type_name(t) + ", got " + type_name(v.type()));
}

double Value::num(const std::string& what) const
{
  need(*this, Type::Number, what);
  return n_;
}

int64_t Value::integer(const std::string& what) const
{
  need(*this, Type::Number, what);
  if (n_ != std::floor(n_) || std::fabs(n_) > 9.007199254740992e15)
    throw Error(what + ": expected an integer, got " + std::to_string(n_));
  return static_cast<int64_t>(n_);
}

bool Value::boolean(const std::string& what) const
{
  need(*this, Type::Bool, what);
  return b_;
}

const std::string& Value::str(const std::string& what) const
{
  need(*this, Type::String, what);
  return s_;
}

const std::vector<Value>& Value::arr(const std::string& what) const
{
  need(*this, Type::Array, what);
  return a_;
}

bool Value::has(const std::string& key) const
{
  return type_ == Type::Object && o_.count(key) && !o_.at(key).is_null();
}

const Value& Value::at(const std::string& key, const std::string& what) const
{
  need(*this, Type::Object, what);
  auto it = o_.find(key);
  if (it == o_.end())
    throw Error(what + ": missing \"" + key + "\"");
  return it->second;
}

double Value::num_or(const std::string& key, double dflt, const std::string& what) const
{
  return has(key) ? o_.at(key).num(what + "." + key) : dflt;
}

int64_t Value::int_or(const std::string& key, int64_t dflt, const std::string& what) const
{
  return has(key) ? o_.at(key).integer(what + "." + key) : dflt;
}

std::string Value::str_or(const std::string& key, const std::string& dflt, const std::string& what) const
{
  return has(key) ? o_.at(key).str(what + "." + key) : dflt;
}

// -- writer ---------------------------------------------------------------------------------------

void Writer::comma()
{
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.back())
    out_ += ',';
  first_.back() = false;
}

Writer& Writer::begin_object()
{
  comma();
  out_ += '{';
  first_.push_back(true);
  return *this;
}

Writer& Writer::end_object()
{
  out_ += '}';
  first_.pop_back();
  return *this;
}

Writer& Writer::begin_array()
{
  comma();
  out_ += '[';
  first_.push_back(true);
  return *this;
}

Writer& Writer::end_array()
{
  out_ += ']';
  first_.pop_back();
  return *this;
}

Writer& Writer::key(const std::string& k)
{
  comma();
  put_string(k);
  out_ += ':';
  after_key_ = true;  // the member's value must not add a comma
  return *this;
}

Writer& Writer::value(double v)
{
  comma();
  if (!std::isfinite(v)) {
    out_ += "null";
    return *this;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out_ += buf;
  return *this;
}

Writer& Writer::value(int64_t v)
{
  comma();
  out_ += std::to_string(v);
  return *this;
}

Writer& Writer::value(const std::string& v)
{
  comma();
  put_string(v);
  return *this;
}

void Writer::put_string(const std::string& v)
{
  out_ += '"';
  for (char c : v) {
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\n': out_ += "\\n"; break;
      case '\t': out_ += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out_ += buf;
        } else {
          out_ += c;
        }
    }
  }
  out_ += '"';
}

}  // namespace iez::json
