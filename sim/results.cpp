// The results file (docs/simulator.md, "Results format").
#include "engine.hpp"

#include <simgrid/version.h>

#include <algorithm>
#include <sys/resource.h>

namespace iez::sim {

namespace {

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

void write_timeline(json::Writer& w, const Timeline& t)
{
  w.key("busy").value(t.busy);
  w.key("streams").begin_array();
  for (const auto& [time, n] : t.steps)
    w.begin_array().value(time).value(static_cast<int64_t>(n)).end_array();
  w.end_array();
}

double rate(double bytes, double seconds)
{
  return seconds > 0 ? bytes / seconds : 0;
}

}  // namespace

std::string Engine::results_json(double wall_seconds) const
{
  std::string out;
  json::Writer w(out);
  double makespan = 0;
  for (const auto& j : jobs_)
    makespan = std::max(makespan, j->end);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);

  w.begin_object();
  w.key("format").value(std::string("iez-sim-results/1"));
  w.key("makespan").value(makespan);
  w.key("engine").begin_object();
  w.key("optim").value(d_.optim);
  w.key("wall_seconds").value(wall_seconds);
  w.key("max_rss_bytes").value(static_cast<int64_t>(ru.ru_maxrss) * 1024);
  int major = 0, minor = 0, patch = 0;
  sg_version_get(&major, &minor, &patch);
  w.key("simgrid").value(std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch));
  w.end_object();

  w.key("jobs").begin_array();
  for (const auto& j : jobs_) {
    const Job& job = *j->job;
    double wb = 0, rb = 0, wt = 0, rt = 0;
    w.begin_object();
    w.key("name").value(job.name);
    w.key("submit").value(job.submit);
    w.key("start").value(j->start);
    w.key("end").value(j->end);
    w.key("end_to_end").value(j->end - job.submit);
    w.key("token_wait").value(j->wait);
    w.key("makespan").value(j->end - job.submit - j->wait);
    w.key("phases").begin_array();
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
      w.begin_object();
      w.key("kind").value(std::string(kind));
      w.key("label").value(ph.label);
      w.key("start").value(rec.start);
      w.key("end").value(rec.end);
      w.key("bytes").value(rec.bytes);
      w.key("bandwidth").value(rate(rec.bytes, dt));
      w.key("token_wait").value(rec.wait);
      w.end_object();
    }
    w.end_array();
    w.key("write_bytes").value(wb);
    w.key("write_time").value(wt);
    w.key("write_bw").value(rate(wb, wt));
    w.key("read_bytes").value(rb);
    w.key("read_time").value(rt);
    w.key("read_bw").value(rate(rb, rt));
    w.end_object();
  }
  w.end_array();

  const Platform& p = d_.platform;
  std::vector<std::vector<std::pair<double, int>>> oss_events(p.osses.size());
  std::vector<double> oss_w(p.osses.size()), oss_r(p.osses.size());
  w.key("osts").begin_array();
  for (size_t k = 0; k < p.osts.size(); k++) {
    const OstRt& o = osts_[k];
    w.begin_object();
    w.key("index").value(static_cast<int64_t>(p.osts[k].index));
    w.key("oss").value(p.osses[p.osts[k].oss].name);
    w.key("bytes_written").value(o.bytes_written);
    w.key("bytes_read").value(o.bytes_read);
    write_timeline(w, timeline(o.streams.events));
    w.end_object();
    auto& ev = oss_events[p.osts[k].oss];
    ev.insert(ev.end(), o.streams.events.begin(), o.streams.events.end());
    oss_w[p.osts[k].oss] += o.bytes_written;
    oss_r[p.osts[k].oss] += o.bytes_read;
  }
  w.end_array();
  w.key("osses").begin_array();
  for (size_t s = 0; s < p.osses.size(); s++) {
    w.begin_object();
    w.key("name").value(p.osses[s].name);
    w.key("bytes_written").value(oss_w[s]);
    w.key("bytes_read").value(oss_r[s]);
    write_timeline(w, timeline(oss_events[s]));
    w.end_object();
  }
  w.end_array();
  w.key("mds").begin_object();
  w.key("ops").value(mds_ops_);
  write_timeline(w, timeline(mds_activity_.events));
  w.end_object();
  w.end_object();
  out += '\n';
  return out;
}

}  // namespace iez::sim
