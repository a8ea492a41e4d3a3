#include "engine.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sys/resource.h>

XBT_LOG_NEW_DEFAULT_CATEGORY(iez_sim, "iez performance simulator");

namespace iez::sim {

// Capacity of a link that must never be the bottleneck (the per-variable bound SimGrid takes from
// the smallest link of a route would otherwise clip single streams).
static constexpr double UNBOUNDED = 1e18;

// Linear interpolation of an OST efficiency table, flat outside it.
static double efficiency(const std::vector<std::pair<double, double>>& pts, int n)
{
  if (pts.empty() || n <= pts.front().first)
    return pts.empty() ? 1.0 : pts.front().second;
  for (size_t k = 1; k < pts.size(); k++)
    if (n <= pts[k].first) {
      const auto& [x0, y0] = pts[k - 1];
      const auto& [x1, y1] = pts[k];
      return y0 + (y1 - y0) * (n - x0) / (x1 - x0);
    }
  return pts.back().second;
}

Engine::Engine(const Description& d, int* argc, char** argv) : d_(d), engine_(argc, argv)
{
  // CM02 without cross-traffic is plain max-min sharing: no TCP slow-start factors (LV08 scales
  // bandwidth by 0.97), no 5 % reverse-path ACK load. network/optim: see docs/simulator.md.
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/optim:" + d_.optim);
  // Lustre keeps at most rpcs_in_flight RPCs per OSC, so one stream moves at most that window
  // per round trip. CM02 bounds each flow by TCP-gamma / (2 x route latency), the same law:
  // gamma is the RPC window, and every route carries rpc_rtt / 2 of latency (on the OST side,
  // so all routes have equal latency and max-min sharing stays fair).
  if (d_.io.rpc_rtt > 0)
    sg4::Engine::set_config("network/TCP-gamma", d_.io.rpcs_in_flight * d_.io.rpc_size);
  build_platform();
}

void Engine::build_platform()
{
  const Platform& p = d_.platform;
  auto* zone        = sg4::create_star_zone("lustre");
  auto link         = [zone](const std::string& name, double bw) { return zone->create_link(name, bw)->seal(); };

  std::vector<sg4::Link*> oss_tx, oss_rx;
  for (const Oss& s : p.osses) {
    oss_tx.push_back(link(s.name + ".tx", s.nic_bw));
    oss_rx.push_back(link(s.name + ".rx", s.nic_bw));
  }

  // Shared objects need their own lock link (only when a lock switch costs time).
  std::map<int64_t, std::pair<int, std::set<int>>> writers;  // object -> (OST, writer nodes)
  if (d_.io.lock_switch > 0)
    for (const Job& j : d_.jobs)
      for (const Phase& ph : j.phases)
        if (ph.kind == PhaseKind::Write)
          for (const Stream& s : ph.streams)
            if (s.object >= 0) {
              auto& [ost, nodes] = writers[s.object];
              if (!nodes.empty() && ost != s.ost)
                throw Error("object " + std::to_string(s.object) + " is given two different OSTs");
              ost = s.ost;
              nodes.insert(j.nodes[s.node]);
            }

  // The rw link (reads and writes sharing the device) costs an LMM element per stream; only
  // OSTs that see both reads and writes somewhere in the description need it.
  std::vector<int> kinds(p.osts.size(), 0);
  for (const Job& j : d_.jobs)
    for (const Phase& ph : j.phases)
      for (const Stream& s : ph.streams)
        kinds[s.ost] |= ph.kind == PhaseKind::Write ? 1 : 2;

  for (size_t k = 0; k < p.osts.size(); k++) {
    const Ost& o = p.osts[k];
    char name[32];
    std::snprintf(name, sizeof name, "OST%04x", o.index);
    std::string n = name;
    // Reads and writes have their own ceilings; the rw link makes them share the device.
    auto* w = zone->create_link(n + ".write", o.write_bw);
    auto* r = zone->create_link(n + ".read", o.read_bw);
    std::vector<sg4::Link*> device{w, r};
    if (kinds[k] == 3)
      device.push_back(zone->create_link(n + ".rw", std::max(o.read_bw, o.write_bw)));
    if (!o.contention.empty()) {
      // Non-linear sharing: the device's capacity depends on how many streams share it
      // (SimGrid examples/cpp/io-degradation; Lebre et al., hal-01197128, Fig. 8).
      auto cb = [pts = o.contention](double capacity, int n) { return capacity * efficiency(pts, n); };
      for (auto* l : device)
        l->set_sharing_policy(sg4::Link::SharingPolicy::NONLINEAR, cb);
    }
    // Every route crosses exactly one of these two links, so all carry the same latency.
    w->set_latency(d_.io.rpc_rtt / 2);
    r->set_latency(d_.io.rpc_rtt / 2);
    for (auto* l : device)
      l->seal();
    std::vector<sg4::LinkInRoute> up{sg4::LinkInRoute(r)}, down{sg4::LinkInRoute(oss_rx[o.oss])};
    if (device.size() == 3) {
      up.emplace_back(device[2]);
      down.emplace_back(device[2]);
    }
    up.emplace_back(oss_tx[o.oss]);
    down.emplace_back(w);
    auto* host = zone->create_host(n, 1.0);
    zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr, up, false);
    zone->add_route(nullptr, host->get_netpoint(), nullptr, nullptr, down, false);
    OstRt rt;
    rt.host = host;
    osts_.push_back(rt);

    for (const auto& [obj, info] : writers) {
      if (info.first != static_cast<int>(k) || info.second.size() < 2)
        continue;
      ObjectRt ob;
      ob.ost       = static_cast<int>(k);
      ob.capacity  = std::make_shared<double>(UNBOUNDED);
      std::string on = n + ".obj" + std::to_string(obj);
      auto* lock     = zone->create_link(on + ".lock", UNBOUNDED);
      // One writer holds the lock undisturbed; two or more pay a switch per grant.
      lock->set_sharing_policy(sg4::Link::SharingPolicy::NONLINEAR,
                               [cap = ob.capacity](double capacity, int n_writers) {
                                 return n_writers >= 2 ? *cap : capacity;
                               });
      lock->seal();
      ob.host = zone->create_host(on, 1.0);
      auto obj_down = down;
      obj_down.insert(obj_down.begin() + 1, sg4::LinkInRoute(lock));
      zone->add_route(ob.host->get_netpoint(), nullptr, nullptr, nullptr, up, false);
      zone->add_route(nullptr, ob.host->get_netpoint(), nullptr, nullptr, obj_down, false);
      object_pos_[obj] = static_cast<int>(objects_.size());
      objects_.push_back(ob);
    }
  }

  std::vector<sg4::Link*> rtr_tx, rtr_rx;
  for (const Router& r : p.routers) {
    rtr_tx.push_back(link(r.name + ".tx", r.bw));
    rtr_rx.push_back(link(r.name + ".rx", r.bw));
  }
  sg4::Link* fabric_up   = p.fabric_bw > 0 ? link("fabric.up", p.fabric_bw) : nullptr;
  sg4::Link* fabric_down = p.fabric_bw > 0 ? link("fabric.down", p.fabric_bw) : nullptr;
  bool client_cpu        = d_.io.call_overhead > 0 || d_.io.osc_overhead > 0;
  bool exchanges         = false;
  for (const Job& j : d_.jobs)
    for (const Phase& ph : j.phases)
      exchanges |= !ph.exchange.empty();

  for (const Client& c : p.clients) {
    ClientRt rt;
    rt.host = zone->create_host(c.name, 1.0);
    if (client_cpu)
      rt.cpu = zone->create_link(c.name + ".cpu", UNBOUNDED)->seal();
    sg4::Link* tx = link(c.name + ".tx", c.nic_bw);
    sg4::Link* rx = link(c.name + ".rx", c.nic_bw);
    // The client's routes to the servers through router `r` (-1: none): its NIC, the router, the fabric.
    auto routes = [&](sg4::Host* h, int r) {
      std::vector<sg4::LinkInRoute> up, down;
      if (rt.cpu)
        up.emplace_back(rt.cpu);
      up.emplace_back(tx);
      down.emplace_back(rx);
      if (r >= 0) {
        up.emplace_back(rtr_tx[r]);
        down.emplace_back(rtr_rx[r]);
      }
      if (fabric_up) {
        up.emplace_back(fabric_up);
        down.emplace_back(fabric_down);
      }
      if (rt.cpu)
        down.emplace_back(rt.cpu);
      std::reverse(down.begin(), down.end());
      zone->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, up, false);
      zone->add_route(nullptr, h->get_netpoint(), nullptr, nullptr, down, false);
    };
    routes(rt.host, c.router);
    // Fine-grained routing: one host per router the client reaches, sharing its NIC and CPU.
    for (int r : c.routes) {
      rt.via[r] = zone->create_host(c.name + "@" + p.routers[r].name, 1.0);
      routes(rt.via[r], r);
    }
    if (exchanges) {
      // MPI between compute nodes crosses their NICs, neither an LNet router nor the Lustre
      // client's protocol cost; the compute fabric itself is not a limit.
      rt.mpi = zone->create_host(c.name + ".mpi", 1.0);
      zone->add_route(rt.mpi->get_netpoint(), nullptr, nullptr, nullptr, {sg4::LinkInRoute(tx)}, false);
      zone->add_route(nullptr, rt.mpi->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(rx)}, false);
    }
    clients_.push_back(rt);
  }
  // The MDS executes metadata work measured in seconds (its speed is 1 "flop" per second).
  mds_ = zone->create_host("mds", 1.0);
  zone->seal();
}

// -- access control ---------------------------------------------------------------------------

void Engine::acquire(JobRt* j, PhaseRec* rec)
{
  double t0 = sg4::Engine::get_clock();
  token_->lock();
  if (d_.access.overhead > 0)
    sg4::this_actor::sleep_for(d_.access.overhead);
  double waited = sg4::Engine::get_clock() - t0;
  j->wait += waited;
  if (rec)
    rec->wait += waited;
}

void Engine::release()
{
  token_->unlock();
}

void Engine::block(JobRt* j, bool on)
{
  std::unique_lock lock(*j->mutex);
  j->blocked = on;
  for (sg4::Comm* c : j->active) {
    if (on && c->get_state() == sg4::Activity::State::STARTED && !c->is_suspended())
      c->suspend();
    else if (!on && c->is_suspended())
      c->resume();
  }
  if (!on)
    j->unblocked->notify_all();
}

void Engine::window_actor(JobRt* j)
{
  for (const auto& [a, b] : j->job->windows) {
    sg4::this_actor::sleep_until(a);
    block(j, false);
    sg4::this_actor::sleep_until(b);
    block(j, true);
  }
  block(j, false);  // after the last window the job runs free, so no schedule can hang it
}

// -- jobs ---------------------------------------------------------------------------------------

double Engine::client_cap(const Phase& ph, const NodeShare& share) const
{
  if (ph.call_size <= 0)
    return UNBOUNDED;
  std::set<int> osts;
  for (const Stream* s : share.streams)
    osts.insert(s->ost);
  double per_call = d_.io.call_overhead + d_.io.osc_overhead * static_cast<double>(osts.size());
  return per_call > 0 ? ph.call_size / per_call : UNBOUNDED;
}

void Engine::set_lock_capacity(const Phase& ph)
{
  // Each grant on a contended object costs a switch (blocking AST, flush, cancel, re-grant),
  // then moves `grant` bytes at most at the OST's speed: cap = grant / (switch + grant / bw).
  double grant = ph.grant > 0 ? ph.grant : d_.io.rpc_size;
  for (const Stream& s : ph.streams) {
    auto it = object_pos_.find(s.object);
    if (it != object_pos_.end())
      *objects_[it->second].capacity = grant / (d_.io.lock_switch + grant / d_.platform.osts[s.ost].write_bw);
  }
}

void Engine::io_step(JobRt* j, int pos, const Phase& ph, int step, int steps)
{
  const bool first_step = step == 0;
  int node                = j->job->nodes[pos];
  const NodeShare& share  = j->shares[&ph - j->job->phases.data()][pos];
  if (first_step) {
    if (share.mds_work > 0) {
      mds_activity_.open(sg4::Engine::get_clock());
      sg4::Exec::init()->set_flops_amount(share.mds_work)->set_host(mds_)->start()->wait();
      mds_activity_.close(sg4::Engine::get_clock());
      mds_ops_ += share.mds_ops;
    }
    if (clients_[node].cpu)
      clients_[node].cpu->set_bandwidth(client_cap(ph, share));
  }
  if (!j->job->windows.empty()) {
    std::unique_lock lock(*j->mutex);
    while (j->blocked)
      j->unblocked->wait(lock);
  }

  struct Open {
    sg4::CommPtr comm;
    int ost;
    double bytes;
  };
  std::vector<Open> open;
  std::vector<sg4::CommPtr> comms;
  for (const Stream* sp : share.streams) {
    const Stream& s = *sp;
    // Call-level steps split each stream evenly; the last step takes the remainder.
    double share = std::floor(s.bytes / steps);
    double bytes = step == steps - 1 ? s.bytes - share * (steps - 1) : share;
    if (bytes <= 0)
      continue;
    sg4::Host* target = osts_[s.ost].host;
    auto it           = object_pos_.find(s.object);
    if (ph.kind == PhaseKind::Write && it != object_pos_.end())
      target = objects_[it->second].host;
    sg4::Host* client = clients_[node].host;
    if (s.router >= 0) {
      auto v = clients_[node].via.find(s.router);
      if (v == clients_[node].via.end())
        throw Error("job " + j->job->name + ": a stream crosses router " + std::to_string(s.router) +
                    ", which is not one of its client's routes");
      client = v->second;
    }
    sg4::Host* src = ph.kind == PhaseKind::Write ? client : target;
    sg4::Host* dst = ph.kind == PhaseKind::Write ? target : client;
    auto comm = sg4::Comm::sendto_async(src, dst, static_cast<uint64_t>(bytes));
    osts_[s.ost].streams.open(sg4::Engine::get_clock());
    open.push_back({comm, s.ost, bytes});
    comms.push_back(comm);
  }
  if (!j->job->windows.empty()) {
    std::unique_lock lock(*j->mutex);
    for (auto& c : comms) {
      j->active.insert(c.get());
      if (j->blocked)  // a window closed while these were being started
        c->suspend();
    }
  }
  sg4::Comm::wait_all(comms);
  if (!j->job->windows.empty()) {
    std::unique_lock lock(*j->mutex);
    for (auto& c : comms)
      j->active.erase(c.get());
  }
  for (const Open& o : open) {
    osts_[o.ost].streams.close(o.comm->get_finish_time());
    (ph.kind == PhaseKind::Write ? osts_[o.ost].bytes_written : osts_[o.ost].bytes_read) += o.bytes;
  }
}

void Engine::exchange(JobRt* j, int pos, const Phase& ph)
{
  // A two-phase collective read's second phase: each node sends the other nodes' ranks what its
  // aggregators read for them, all at once, max-min shared on the NICs.
  const NodeShare& share = j->shares[&ph - j->job->phases.data()][pos];
  std::vector<sg4::CommPtr> comms;
  for (const Transfer* t : share.sends)
    if (t->bytes > 0)
      comms.push_back(sg4::Comm::sendto_async(clients_[j->job->nodes[t->from]].mpi,
                                              clients_[j->job->nodes[t->to]].mpi, static_cast<uint64_t>(t->bytes)));
  sg4::Comm::wait_all(comms);
}

void Engine::node_actor(JobRt* j, int pos)
{
  const Job& job   = *j->job;
  const bool lead  = pos == 0;
  const auto gran  = d_.access.granularity;
  sg4::this_actor::sleep_until(job.submit);
  if (lead && gran == Granularity::Job)
    acquire(j, nullptr);
  j->barrier->wait();
  if (lead)
    j->start = sg4::Engine::get_clock();
  for (size_t k = 0; k < job.phases.size(); k++) {
    const Phase& ph = job.phases[k];
    PhaseRec& rec   = j->phases[k];
    if (ph.kind == PhaseKind::Compute) {
      if (lead)
        rec.start = sg4::Engine::get_clock();
      sg4::this_actor::sleep_for(ph.seconds);
      j->barrier->wait();
      if (lead)
        rec.end = sg4::Engine::get_clock();
      continue;
    }
    if (lead && gran == Granularity::Phase)
      acquire(j, nullptr);
    if (lead && ph.kind == PhaseKind::Write)
      set_lock_capacity(ph);
    j->barrier->wait();
    if (lead)
      rec.start = sg4::Engine::get_clock();
    int steps = gran == Granularity::Call ? ph.calls : 1;
    for (int s = 0; s < steps; s++) {
      if (lead && gran == Granularity::Call)
        acquire(j, &rec);
      if (gran == Granularity::Call)
        j->barrier->wait();
      io_step(j, pos, ph, s, steps);
      j->barrier->wait();
      if (lead && gran == Granularity::Call)
        release();
    }
    if (!ph.exchange.empty()) {
      double t0 = sg4::Engine::get_clock();
      exchange(j, pos, ph);
      j->barrier->wait();
      if (lead)
        rec.exchange = sg4::Engine::get_clock() - t0;
    }
    if (lead) {
      rec.end = sg4::Engine::get_clock();
      if (gran == Granularity::Phase)
        release();
    }
  }
  j->barrier->wait();
  if (lead) {
    j->end = sg4::Engine::get_clock();
    if (gran == Granularity::Job)
      release();
  }
}

void Engine::run()
{
  token_ = sg4::Mutex::create();
  for (const Job& job : d_.jobs) {
    auto j     = std::make_unique<JobRt>();
    j->job     = &job;
    j->barrier = sg4::Barrier::create(static_cast<unsigned>(job.nodes.size()));
    j->phases.resize(job.phases.size());
    j->shares.assign(job.phases.size(), std::vector<NodeShare>(job.nodes.size()));
    for (size_t k = 0; k < job.phases.size(); k++) {
      const Phase& ph = job.phases[k];
      auto& shares    = j->shares[k];
      for (const Stream& s : ph.streams) {
        j->phases[k].bytes += s.bytes;
        shares[s.node].streams.push_back(&s);
      }
      for (const Transfer& t : ph.exchange)
        shares[t.from].sends.push_back(&t);
      for (const auto& [n, c] : ph.creates) {
        shares[n].mds_work += c / d_.platform.mds_create_rate;
        shares[n].mds_ops += c;
      }
      for (const auto& [n, c] : ph.opens) {
        shares[n].mds_work += c / d_.platform.mds_open_rate;
        shares[n].mds_ops += c;
      }
    }
    j->mutex     = sg4::Mutex::create();
    j->unblocked = sg4::ConditionVariable::create();
    j->blocked   = !job.windows.empty();
    jobs_.push_back(std::move(j));
  }
  for (auto& j : jobs_) {
    JobRt* jr = j.get();
    for (size_t pos = 0; pos < jr->job->nodes.size(); pos++)
      sg4::Actor::create(jr->job->name + "#" + std::to_string(pos), clients_[jr->job->nodes[pos]].host,
                         [this, jr, pos] { node_actor(jr, static_cast<int>(pos)); });
    if (!jr->job->windows.empty())
      sg4::Actor::create(jr->job->name + "/windows", mds_, [this, jr] { window_actor(jr); })->daemonize();
  }
  engine_.run();
  for (const auto& j : jobs_)
    if (j->end < 0)
      throw Error("job " + j->job->name + " did not finish (the simulation deadlocked)");
}

}  // namespace iez::sim
