// The simulation: a Lustre platform in one SimGrid star zone, one actor per (job, client node),
// and the records the results file is made of.
#pragma once

#include "description.hpp"

#include <simgrid/s4u.hpp>

#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

namespace iez::sim {

namespace sg4 = simgrid::s4u;

// Times at which the number of open streams on a target changes (+1 / -1).
struct Activity {
  std::vector<std::pair<double, int>> events;
  void open(double t) { events.emplace_back(t, +1); }
  void close(double t) { events.emplace_back(t, -1); }
};

struct OstRt {
  sg4::Host* host = nullptr;
  double bytes_written = 0;
  double bytes_read    = 0;
  Activity streams;
};

// An OST object written by several client nodes at once (a stripe of a shared file): data to
// it passes a lock link whose capacity stands for extent-lock switching (docs/simulator.md).
struct ObjectRt {
  sg4::Host* host = nullptr;
  int ost         = 0;
  std::shared_ptr<double> capacity;  // bytes/s when two or more writers contend; set per phase
};

struct ClientRt {
  sg4::Host* host = nullptr;
  sg4::Link* cpu  = nullptr;  // client protocol cost (null when the description sets none)
  std::map<int, sg4::Host*> via;  // per router of its routes: the client as seen through that router
  sg4::Host* mpi = nullptr;  // the client as an MPI peer: its NIC alone (only when a phase has an exchange)
};

struct PhaseRec {
  double start = -1;
  double end   = -1;
  double bytes = 0;
  double wait  = 0;  // token waits inside the phase
  double exchange = 0;  // seconds of its collective read's exchange (inside start..end)
};

// One phase's share of one node: its streams and its metadata work (MDS seconds, ops).
struct NodeShare {
  std::vector<const Stream*> streams;
  double mds_work = 0;
  double mds_ops  = 0;
  std::vector<const Transfer*> sends;  // its part of the phase's exchange
};

struct JobRt {
  const Job* job = nullptr;
  std::vector<std::vector<NodeShare>> shares;  // [phase][node position]
  sg4::BarrierPtr barrier;
  std::vector<PhaseRec> phases;
  double start = -1;  // first moment the job ran (after an initial job-level token wait)
  double end   = -1;
  double wait  = 0;   // all token waits
  // Time windows: while blocked, the job's streams are suspended and no new one starts.
  bool blocked = false;
  double blocked_time = 0;
  sg4::MutexPtr mutex;
  sg4::ConditionVariablePtr unblocked;
  std::unordered_set<sg4::Comm*> active;
};

class Engine {
public:
  Engine(const Description& d, int* argc, char** argv);
  void run();
  std::string results_json(double wall_seconds) const;

private:
  void build_platform();
  void node_actor(JobRt* j, int pos);
  void window_actor(JobRt* j);
  void io_step(JobRt* j, int pos, const Phase& ph, int step, int steps);
  void exchange(JobRt* j, int pos, const Phase& ph);
  void acquire(JobRt* j, PhaseRec* rec);
  void release();
  void set_lock_capacity(const Phase& ph);
  void block(JobRt* j, bool on);
  double client_cap(const Phase& ph, const NodeShare& share) const;

  const Description& d_;
  sg4::Engine engine_;
  std::vector<OstRt> osts_;
  std::vector<ClientRt> clients_;
  std::vector<ObjectRt> objects_;
  std::unordered_map<int64_t, int> object_pos_;  // shared object id -> objects_ position
  sg4::Host* mds_ = nullptr;
  double mds_ops_ = 0;
  Activity mds_activity_;
  sg4::MutexPtr token_;
  std::vector<std::unique_ptr<JobRt>> jobs_;
};

}  // namespace iez::sim
