// A small JSON reader and writer for the engine's description and results files.
// The engine must not depend on a JSON package beyond what SimGrid pulls in, so this covers
// exactly RFC 8259 values; errors carry the line and column so a bad file is one clear line.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace iez::json {

// Bad input: the message is one line, shown to the user as-is.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class Value {
public:
  enum class Type { Null, Bool, Number, String, Array, Object };

  Value() = default;
  static Value parse(const std::string& text);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }

  // Typed access; `what` names the field in the error message.
  double num(const std::string& what) const;
  int64_t integer(const std::string& what) const;
  bool boolean(const std::string& what) const;
  const std::string& str(const std::string& what) const;
  const std::vector<Value>& arr(const std::string& what) const;

  bool has(const std::string& key) const;
  const Value& at(const std::string& key, const std::string& what) const;  // required member
  // Optional members with a default.
  double num_or(const std::string& key, double dflt, const std::string& what) const;
  int64_t int_or(const std::string& key, int64_t dflt, const std::string& what) const;
  std::string str_or(const std::string& key, const std::string& dflt, const std::string& what) const;

private:
  friend class Parser;
  Type type_ = Type::Null;
  bool b_ = false;
  double n_ = 0;
  std::string s_;
  std::vector<Value> a_;
  std::map<std::string, Value> o_;
};

// Streaming writer: numbers are written with enough digits to round-trip a double.
class Writer {
public:
  explicit Writer(std::string& out) : out_(out) {}
  Writer& begin_object();
  Writer& end_object();
  Writer& begin_array();
  Writer& end_array();
  Writer& key(const std::string& k);
  Writer& value(double v);
  Writer& value(int64_t v);
  Writer& value(const std::string& v);

private:
  void comma();
  void put_string(const std::string& v);
  std::string& out_;
  std::vector<bool> first_{true};
  bool after_key_ = false;
};

}  // namespace iez::json
