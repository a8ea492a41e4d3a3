#include "description.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <set>

namespace iez::sim {

namespace {

using nlohmann::json;

// A JSON value read through typed accessors whose errors name the field (`what`), so a bad
// description is one line such as `platform.osts[2].read_bw: expected a number, got a string`.
// Types are checked here, not by json::get, which would read true as 1 and 2.5 as the integer 2.
class Value {
public:
  Value(const json& j) : j_(j) {}  // implicit: array elements and members are Values (a reference: cheap to copy)

  double num(const std::string& what) const
  {
    need(j_.is_number(), "a number", what);
    return j_.get<double>();
  }

  int64_t integer(const std::string& what) const
  {
    double n = num(what);
    // Only integers a double holds exactly, so an id or count is never silently rounded.
    if (n != std::floor(n) || std::fabs(n) > 9.007199254740992e15)
      throw Error(what + ": expected an integer, got " + std::to_string(n));
    return static_cast<int64_t>(n);
  }

  const std::string& str(const std::string& what) const
  {
    need(j_.is_string(), "a string", what);
    return j_.get_ref<const std::string&>();
  }

  const json::array_t& arr(const std::string& what) const
  {
    need(j_.is_array(), "an array", what);
    return j_.get_ref<const json::array_t&>();
  }

  // A member that is present and not null.
  bool has(const std::string& key) const
  {
    if (!j_.is_object())
      return false;
    auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }

  Value at(const std::string& key, const std::string& what) const  // a required member
  {
    need(j_.is_object(), "an object", what);
    auto it = j_.find(key);
    if (it == j_.end())
      throw Error(what + ": missing \"" + key + "\"");
    return *it;
  }

  // Optional members with a default.
  double num_or(const std::string& key, double dflt, const std::string& what) const
  {
    return has(key) ? Value(j_.at(key)).num(what + "." + key) : dflt;
  }

  int64_t int_or(const std::string& key, int64_t dflt, const std::string& what) const
  {
    return has(key) ? Value(j_.at(key)).integer(what + "." + key) : dflt;
  }

  std::string str_or(const std::string& key, const std::string& dflt, const std::string& what) const
  {
    return has(key) ? Value(j_.at(key)).str(what + "." + key) : dflt;
  }

private:
  const json& j_;

  void need(bool ok, const char* expected, const std::string& what) const
  {
    if (!ok)
      throw Error(what + ": expected " + expected + ", got " + type_name());
  }

  const char* type_name() const
  {
    switch (j_.type()) {
      case json::value_t::null: return "null";
      case json::value_t::boolean: return "a boolean";
      case json::value_t::number_integer:
      case json::value_t::number_unsigned:
      case json::value_t::number_float: return "a number";  // JSON has one number type
      case json::value_t::string: return "a string";
      case json::value_t::array: return "an array";
      case json::value_t::object: return "an object";
      default: return "?";
    }
  }
};

// The text as a JSON document; bad syntax is one line with its line and column.
json parse_json(const std::string& text)
{
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 2: DETAIL", or
    // for a number beyond a double's range "[json.exception.out_of_range.406] number overflow ...".
    std::string m = e.what();
    auto tag      = m.find("] ");
    if (tag != std::string::npos)
      m.erase(0, tag + 2);
    const std::string pe = "parse error";
    throw Error(m.rfind(pe, 0) == 0 ? "bad JSON" + m.substr(pe.size()) : "bad JSON: " + m);
  }
}

}  // namespace

static double positive(double v, const std::string& what)
{
  if (!(v > 0))
    throw Error(what + ": must be > 0, got " + std::to_string(v));
  return v;
}

static double non_negative(double v, const std::string& what)
{
  if (v < 0)
    throw Error(what + ": must be >= 0, got " + std::to_string(v));
  return v;
}

static std::vector<std::pair<double, double>> pairs(const Value& v, const std::string& what)
{
  std::vector<std::pair<double, double>> out;
  size_t k = 0;
  for (const Value p : v.arr(what)) {
    std::string w = what + "[" + std::to_string(k++) + "]";
    const auto& a = p.arr(w);
    if (a.size() != 2)
      throw Error(w + ": expected a pair [x, y]");
    out.emplace_back(Value(a[0]).num(w), Value(a[1]).num(w));
  }
  return out;
}

static std::vector<std::pair<double, double>> contention(const Value& v, const std::string& what)
{
  auto pts = pairs(v, what);
  for (size_t k = 0; k < pts.size(); k++) {
    if (pts[k].first < 1 || pts[k].second <= 0)
      throw Error(what + ": points are [streams >= 1, factor > 0]");
    if (k && pts[k].first <= pts[k - 1].first)
      throw Error(what + ": stream counts must increase");
  }
  return pts;
}

static Platform parse_platform(const Value& p)
{
  Platform pl;
  const std::string W = "platform";
  std::map<std::string, int> oss_pos;
  for (const Value o : p.at("osses", W).arr(W + ".osses")) {
    std::string w = W + ".osses[" + std::to_string(pl.osses.size()) + "]";
    Oss s{o.at("name", w).str(w + ".name"), positive(o.at("nic_bw", w).num(w + ".nic_bw"), w + ".nic_bw")};
    if (oss_pos.count(s.name))
      throw Error(w + ": OSS name " + s.name + " repeats");
    oss_pos[s.name] = static_cast<int>(pl.osses.size());
    pl.osses.push_back(s);
  }
  if (pl.osses.empty())
    throw Error("platform.osses: a platform needs at least one OSS");
  std::vector<std::pair<double, double>> dflt;
  if (p.has("contention"))
    dflt = contention(p.at("contention", W), W + ".contention");
  std::set<int> seen;
  for (const Value o : p.at("osts", W).arr(W + ".osts")) {
    std::string w = W + ".osts[" + std::to_string(pl.osts.size()) + "]";
    Ost t;
    t.index = static_cast<int>(o.at("index", w).integer(w + ".index"));
    if (!seen.insert(t.index).second)
      throw Error(w + ": OST index " + std::to_string(t.index) + " repeats");
    t.oss = static_cast<int>(o.at("oss", w).integer(w + ".oss"));
    if (t.oss < 0 || t.oss >= static_cast<int>(pl.osses.size()))
      throw Error(w + ".oss: no OSS at position " + std::to_string(t.oss));
    t.read_bw    = positive(o.at("read_bw", w).num(w + ".read_bw"), w + ".read_bw");
    t.write_bw   = positive(o.at("write_bw", w).num(w + ".write_bw"), w + ".write_bw");
    t.contention = o.has("contention") ? contention(o.at("contention", w), w + ".contention") : dflt;
    pl.osts.push_back(t);
  }
  if (pl.osts.empty())
    throw Error("platform.osts: a platform needs at least one OST");
  if (p.has("routers"))
    for (const Value r : p.at("routers", W).arr(W + ".routers")) {
      std::string w = W + ".routers[" + std::to_string(pl.routers.size()) + "]";
      pl.routers.push_back({r.at("name", w).str(w + ".name"), positive(r.at("bw", w).num(w + ".bw"), w + ".bw")});
    }
  for (const Value c : p.at("clients", W).arr(W + ".clients")) {
    std::string w = W + ".clients[" + std::to_string(pl.clients.size()) + "]";
    Client cl{c.at("name", w).str(w + ".name"), positive(c.at("nic_bw", w).num(w + ".nic_bw"), w + ".nic_bw"),
              static_cast<int>(c.int_or("router", -1, w)), {}};
    if (cl.router < -1 || cl.router >= static_cast<int>(pl.routers.size()))
      throw Error(w + ".router: no router at position " + std::to_string(cl.router));
    if (c.has("routes")) {
      for (const Value r : c.at("routes", w).arr(w + ".routes")) {
        int k = static_cast<int>(r.integer(w + ".routes"));
        if (k < 0 || k >= static_cast<int>(pl.routers.size()))
          throw Error(w + ".routes: no router at position " + std::to_string(k));
        cl.routes.push_back(k);
      }
      if (cl.router >= 0 && !cl.routes.empty())
        throw Error(w + ": give router or routes, not both");
    }
    pl.clients.push_back(cl);
  }
  if (pl.clients.empty())
    throw Error("platform.clients: a platform needs at least one client");
  pl.fabric_bw = non_negative(p.num_or("fabric_bw", 0, W), W + ".fabric_bw");
  if (p.has("mds")) {
    const Value& m     = p.at("mds", W);
    pl.mds_create_rate = positive(m.num_or("create_rate", pl.mds_create_rate, W + ".mds"), W + ".mds.create_rate");
    pl.mds_open_rate   = positive(m.num_or("open_rate", pl.mds_open_rate, W + ".mds"), W + ".mds.open_rate");
  }
  return pl;
}

static std::vector<std::pair<int, double>> counts(const Value& ph, const std::string& key, const std::string& w,
                                                  size_t n_nodes)
{
  std::vector<std::pair<int, double>> out;
  if (!ph.has(key))
    return out;
  for (const auto& [node, n] : pairs(ph.at(key, w), w + "." + key)) {
    if (node < 0 || node >= n_nodes || node != static_cast<int>(node))
      throw Error(w + "." + key + ": node " + std::to_string(node) + " is not a position in the job's nodes");
    out.emplace_back(static_cast<int>(node), non_negative(n, w + "." + key));
  }
  return out;
}

static Phase parse_phase(const Value& ph, const std::string& w, size_t n_nodes, const std::map<int, int>& ost_pos)
{
  Phase p;
  std::string kind = ph.at("kind", w).str(w + ".kind");
  p.label          = ph.str_or("label", kind, w);
  if (kind == "compute") {
    p.kind    = PhaseKind::Compute;
    p.seconds = non_negative(ph.at("seconds", w).num(w + ".seconds"), w + ".seconds");
    return p;
  }
  if (kind == "write")
    p.kind = PhaseKind::Write;
  else if (kind == "read")
    p.kind = PhaseKind::Read;
  else
    throw Error(w + ".kind: \"" + kind + "\" is not one of compute, write, read");
  p.calls = static_cast<int>(ph.int_or("calls", 1, w));
  if (p.calls < 1)
    throw Error(w + ".calls: must be >= 1");
  p.call_size = non_negative(ph.num_or("call_size", 0, w), w + ".call_size");
  p.grant     = non_negative(ph.num_or("grant", 0, w), w + ".grant");
  p.creates   = counts(ph, "creates", w, n_nodes);
  p.opens     = counts(ph, "opens", w, n_nodes);
  size_t k    = 0;
  for (const Value s : ph.at("streams", w).arr(w + ".streams")) {
    std::string ws = w + ".streams[" + std::to_string(k++) + "]";
    const auto& a  = s.arr(ws);
    if (a.size() != 4 && a.size() != 5)
      throw Error(ws + ": expected [node, ost, bytes, object] or [node, ost, bytes, object, router]");
    Stream st;
    st.node = static_cast<int>(Value(a[0]).integer(ws + " node"));
    if (st.node < 0 || st.node >= static_cast<int>(n_nodes))
      throw Error(ws + ": node " + std::to_string(st.node) + " is not a position in the job's nodes");
    int index = static_cast<int>(Value(a[1]).integer(ws + " ost"));
    auto it   = ost_pos.find(index);
    if (it == ost_pos.end())
      throw Error(ws + ": unknown OST index " + std::to_string(index));
    st.ost    = it->second;
    st.bytes  = non_negative(Value(a[2]).num(ws + " bytes"), ws + " bytes");
    st.object = Value(a[3]).integer(ws + " object");
    if (a.size() == 5)
      st.router = static_cast<int>(Value(a[4]).integer(ws + " router"));
    p.streams.push_back(st);
  }
  if (ph.has("exchange")) {
    if (p.kind != PhaseKind::Read)
      throw Error(w + ".exchange: only a read phase has an exchange (a collective read's second phase)");
    k = 0;
    for (const Value t : ph.at("exchange", w).arr(w + ".exchange")) {
      std::string wt = w + ".exchange[" + std::to_string(k++) + "]";
      const auto& a  = t.arr(wt);
      if (a.size() != 3)
        throw Error(wt + ": expected [from node, to node, bytes]");
      Transfer tr{static_cast<int>(Value(a[0]).integer(wt + " from")), static_cast<int>(Value(a[1]).integer(wt + " to")),
                  non_negative(Value(a[2]).num(wt + " bytes"), wt + " bytes")};
      for (int node : {tr.from, tr.to})
        if (node < 0 || node >= static_cast<int>(n_nodes))
          throw Error(wt + ": node " + std::to_string(node) + " is not a position in the job's nodes");
      if (tr.from == tr.to)
        throw Error(wt + ": a node sends nothing to itself over the network");
      p.exchange.push_back(tr);
    }
  }
  return p;
}

Description parse_description(const std::string& text)
{
  json parsed = parse_json(text);
  Value doc(parsed);
  Description d;
  std::string fmt = doc.at("format", "description").str("format");
  if (fmt != "iez-sim/1")
    throw Error("format: \"" + fmt + "\" is not iez-sim/1");
  if (doc.has("engine")) {
    d.optim = doc.at("engine", "description").str_or("optim", d.optim, "engine");
    if (d.optim != "Full" && d.optim != "Lazy")
      throw Error("engine.optim: \"" + d.optim + "\" is not Full or Lazy");
  }
  d.platform = parse_platform(doc.at("platform", "description"));
  std::map<int, int> ost_pos;
  for (size_t k = 0; k < d.platform.osts.size(); k++)
    ost_pos[d.platform.osts[k].index] = static_cast<int>(k);

  if (doc.has("io")) {
    const Value& io     = doc.at("io", "description");
    d.io.rpc_size       = positive(io.num_or("rpc_size", d.io.rpc_size, "io"), "io.rpc_size");
    d.io.rpcs_in_flight = positive(io.num_or("rpcs_in_flight", d.io.rpcs_in_flight, "io"), "io.rpcs_in_flight");
    d.io.rpc_rtt        = non_negative(io.num_or("rpc_rtt", 0, "io"), "io.rpc_rtt");
    d.io.lock_switch    = non_negative(io.num_or("lock_switch", 0, "io"), "io.lock_switch");
    d.io.call_overhead  = non_negative(io.num_or("call_overhead", 0, "io"), "io.call_overhead");
    d.io.osc_overhead   = non_negative(io.num_or("osc_overhead", 0, "io"), "io.osc_overhead");
  }
  if (doc.has("access")) {
    const Value& a = doc.at("access", "description");
    std::string g  = a.str_or("granularity", "none", "access");
    if (g == "none")
      d.access.granularity = Granularity::None;
    else if (g == "job")
      d.access.granularity = Granularity::Job;
    else if (g == "phase")
      d.access.granularity = Granularity::Phase;
    else if (g == "call")
      d.access.granularity = Granularity::Call;
    else
      throw Error("access.granularity: \"" + g + "\" is not one of none, job, phase, call");
    d.access.overhead = non_negative(a.num_or("overhead", 0, "access"), "access.overhead");
  }

  std::set<int> used_nodes;
  std::set<std::string> names;
  for (const Value j : doc.at("jobs", "description").arr("jobs")) {
    std::string w = "jobs[" + std::to_string(d.jobs.size()) + "]";
    Job job;
    job.name = j.at("name", w).str(w + ".name");
    if (!names.insert(job.name).second)
      throw Error(w + ": job name " + job.name + " repeats");
    w          = "job " + job.name;
    job.submit = non_negative(j.num_or("submit", 0, w), w + ".submit");
    for (const Value n : j.at("nodes", w).arr(w + ".nodes")) {
      int c = static_cast<int>(n.integer(w + ".nodes"));
      if (c < 0 || c >= static_cast<int>(d.platform.clients.size()))
        throw Error(w + ".nodes: no client at position " + std::to_string(c));
      if (!used_nodes.insert(c).second)
        throw Error(w + ".nodes: client " + d.platform.clients[c].name + " is already used by another job");
      job.nodes.push_back(c);
    }
    if (job.nodes.empty())
      throw Error(w + ".nodes: a job needs at least one client node");
    if (j.has("windows")) {
      job.windows = pairs(j.at("windows", w), w + ".windows");
      for (size_t k = 0; k < job.windows.size(); k++) {
        const auto& [a, b] = job.windows[k];
        if (a < 0 || b <= a || (k && a < job.windows[k - 1].second))
          throw Error(w + ".windows: windows are [start, end) with start < end, in time order, not overlapping");
      }
    }
    size_t k = 0;
    for (const Value ph : j.at("phases", w).arr(w + ".phases"))
      job.phases.push_back(parse_phase(ph, w + ".phases[" + std::to_string(k++) + "]", job.nodes.size(), ost_pos));
    d.jobs.push_back(std::move(job));
  }
  if (d.jobs.empty())
    throw Error("jobs: a description needs at least one job");
  // SimGrid 3.32's Lazy update loses suspended network actions: resumed streams never finish
  // and the run deadlocks (docs/simulator.md). Windows suspend streams, so they need Full.
  for (const Job& j : d.jobs)
    if (!j.windows.empty() && d.optim == "Lazy")
      throw Error("job " + j.name + ": time windows need engine.optim \"Full\" (Lazy loses suspended streams)");
  return d;
}

}  // namespace iez::sim
