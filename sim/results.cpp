// The results file (docs/simulator.md, "Results format").
#include "engine.hpp"

#include <nlohmann/json.hpp>
#include <simgrid/version.h>

#include <algorithm>
#include <sys/resource.h>

namespace iez::sim {

namespace {

// Keys in the order written (docs/simulator.md); doubles are written with the fewest digits that
// read back as the same double.
using Json = nlohmann::ordered_json;

struct Timeline {
  std::vector<std::pair<double, int>> steps;  // (time, open streams from then on)
  double busy = 0;                            // time with at least one open stream
};

Timeline timeline(std::vector<std::pair<double, int>> ev)
{
  // Closes sort before opens at the same instant, so back-to-back streams do not count twice.
  std::sort(ev.begin(), ev.end());
  Timeline t;
  int n         = 0;
  double since  = 0;
  for (size_t k = 0; k < ev.size();) {
    double now = ev[k].first;
    int before = n;
    for (; k < ev.size() && ev[k].first == now; k++)
      n += ev[k].second;
    if (before > 0 && n == 0)
      t.busy += now - since;
    if (before == 0 && n > 0)
      since = now;
    if (n != before)
      t.steps.emplace_back(now, n);
  }
  return t;
}

void add_timeline(Json& o, const Timeline& t)
{
  o["busy"]    = t.busy;
  Json streams = Json::array();
  for (const auto& [time, n] : t.steps)
    streams.push_back(Json::array({time, n}));
  o["streams"] = std::move(streams);
}

double rate(double bytes, double seconds)
{
  return seconds > 0 ? bytes / seconds : 0;
}

}  // namespace

std::string Engine::results_json(double wall_seconds) const
{
  double makespan = 0;
  for (const auto& j : jobs_)
    makespan = std::max(makespan, j->end);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  int major = 0, minor = 0, patch = 0;
  sg_version_get(&major, &minor, &patch);

  Json out = {
      {"format", "iez-sim-results/1"},
      {"makespan", makespan},
      {"engine",
       {{"optim", d_.optim},
        {"wall_seconds", wall_seconds},
        {"max_rss_bytes", static_cast<int64_t>(ru.ru_maxrss) * 1024},
        {"simgrid", std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch)}}},
  };

  Json jobs = Json::array();
  for (const auto& j : jobs_) {
    const Job& job = *j->job;
    double wb = 0, rb = 0, wt = 0, rt = 0;
    Json phases = Json::array();
    for (size_t k = 0; k < job.phases.size(); k++) {
      const Phase& ph     = job.phases[k];
      const PhaseRec& rec = j->phases[k];
      double dt           = rec.end - rec.start;
      const char* kind    = ph.kind == PhaseKind::Compute ? "compute" : ph.kind == PhaseKind::Write ? "write" : "read";
      if (ph.kind == PhaseKind::Write) {
        wb += rec.bytes;
        wt += dt;
      } else if (ph.kind == PhaseKind::Read) {
        rb += rec.bytes;
        rt += dt;
      }
      Json out{{"kind", kind},       {"label", ph.label},
               {"start", rec.start}, {"end", rec.end},
               {"bytes", rec.bytes}, {"bandwidth", rate(rec.bytes, dt)},
               {"token_wait", rec.wait}};
      if (!ph.exchange.empty())
        out["exchange"] = rec.exchange;
      phases.push_back(std::move(out));
    }
    jobs.push_back({{"name", job.name},
                    {"submit", job.submit},
                    {"start", j->start},
                    {"end", j->end},
                    {"end_to_end", j->end - job.submit},
                    {"token_wait", j->wait},
                    {"makespan", j->end - job.submit - j->wait},
                    {"phases", std::move(phases)},
                    {"write_bytes", wb},
                    {"write_time", wt},
                    {"write_bw", rate(wb, wt)},
                    {"read_bytes", rb},
                    {"read_time", rt},
                    {"read_bw", rate(rb, rt)}});
  }
  out["jobs"] = std::move(jobs);

  const Platform& p = d_.platform;
  std::vector<std::vector<std::pair<double, int>>> oss_events(p.osses.size());
  std::vector<double> oss_w(p.osses.size()), oss_r(p.osses.size());
  Json osts = Json::array();
  for (size_t k = 0; k < p.osts.size(); k++) {
    const OstRt& o = osts_[k];
    Json ost       = {{"index", p.osts[k].index},
                      {"oss", p.osses[p.osts[k].oss].name},
                      {"bytes_written", o.bytes_written},
                      {"bytes_read", o.bytes_read}};
    add_timeline(ost, timeline(o.streams.events));
    osts.push_back(std::move(ost));
    auto& ev = oss_events[p.osts[k].oss];
    ev.insert(ev.end(), o.streams.events.begin(), o.streams.events.end());
    oss_w[p.osts[k].oss] += o.bytes_written;
    oss_r[p.osts[k].oss] += o.bytes_read;
  }
  out["osts"] = std::move(osts);
  Json osses  = Json::array();
  for (size_t s = 0; s < p.osses.size(); s++) {
    Json oss = {{"name", p.osses[s].name}, {"bytes_written", oss_w[s]}, {"bytes_read", oss_r[s]}};
    add_timeline(oss, timeline(oss_events[s]));
    osses.push_back(std::move(oss));
  }
  out["osses"] = std::move(osses);
  Json mds     = {{"ops", mds_ops_}};
  add_timeline(mds, timeline(mds_activity_.events));
  out["mds"] = std::move(mds);
  return out.dump() + "\n";
}

}  // namespace iez::sim
