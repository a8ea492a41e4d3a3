// The engine's input: a Lustre platform, I/O parameters, access control and jobs made of
// phases (docs/simulator.md, "Description format"). Plain data, checked when read.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace iez::sim {

// Bad input (or a run that cannot finish): the message is one line, shown to the user as-is.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct Oss {
  std::string name;
  double nic_bw;  // bytes/s, each direction
};

struct Ost {
  int index;  // Lustre OST index
  int oss;    // position in Platform::osses
  double read_bw;
  double write_bw;
  // Efficiency against concurrent streams, as (streams, factor) points: the OST delivers
  // factor x nominal bandwidth when that many streams share it (linear in between).
  std::vector<std::pair<double, double>> contention;
};

struct Router {
  std::string name;
  double bw;  // bytes/s, each direction
};

struct Client {
  std::string name;
  double nic_bw;
  int router;  // position in Platform::routers, or -1 when the client sits on the server fabric
  // Fine-grained routing: the routers (positions) this client's streams may cross, each stream
  // naming its own (Stream::router); empty when `router` alone gives the route.
  std::vector<int> routes;
};

struct Platform {
  std::vector<Oss> osses;
  std::vector<Ost> osts;
  std::vector<Router> routers;
  std::vector<Client> clients;
  double fabric_bw = 0;  // bisection of the LNet fabric, bytes/s each direction (0 = not a limit)
  double mds_create_rate = 20000;
  double mds_open_rate   = 40000;
};

// How Lustre moves data (the client's osc.*.max_rpcs_in_flight and max_pages_per_rpc; not in the
// Lustre notes, references: l-not-in-notes).
struct IoParams {
  double rpc_size       = 1 << 20;
  double rpcs_in_flight = 8;
  double rpc_rtt        = 0;  // seconds per RPC round trip (0 = no per-stream window limit)
  double lock_switch    = 0;  // seconds to move an extent lock between clients (0 = no lock cost)
  double call_overhead  = 0;  // client seconds per application I/O call
  double osc_overhead   = 0;  // extra client seconds per call for each OST the client talks to
};

enum class Granularity { None, Job, Phase, Call };

struct Access {
  Granularity granularity = Granularity::None;  // IO-Cop exclusive token (None = no token)
  double overhead         = 0;                  // seconds per token round trip
};

struct Stream {
  int node;      // position in Job::nodes
  int ost;       // position in Platform::osts
  double bytes;
  int64_t object;  // OST object id shared by several nodes (SSF file), -1 if private
  int router = -1;  // the router it crosses, one of its client's routes (-1 = the client's route)
};

enum class PhaseKind { Compute, Write, Read };

// Bytes one node sends another over the compute network (MPI), not through Lustre: the second
// phase of a two-phase collective read, after the aggregators' reads (docs/simulator.md).
struct Transfer {
  int from;  // positions in Job::nodes
  int to;
  double bytes;
};

struct Phase {
  PhaseKind kind;
  std::string label;
  double seconds = 0;  // compute phases
  int calls      = 1;  // application I/O calls per node (steps for call-level access control)
  double call_size = 0;  // bytes per application call (0 = whole stream in one call)
  double grant     = 0;  // bytes an extent lock grant covers on a shared object (0 = rpc_size)
  std::vector<std::pair<int, double>> creates;  // (node, files created)
  std::vector<std::pair<int, double>> opens;    // (node, files opened)
  std::vector<Stream> streams;
  std::vector<Transfer> exchange;  // read phases: sent once every node's reads are done
};

struct Job {
  std::string name;
  double submit = 0;
  std::vector<int> nodes;  // positions in Platform::clients, distinct across jobs
  std::vector<std::pair<double, double>> windows;  // [start, end) when the job may move data
  std::vector<Phase> phases;
};

struct Description {
  std::string optim = "Full";  // SimGrid network/optim (docs/simulator.md says why not Lazy)
  Platform platform;
  IoParams io;
  Access access;
  std::vector<Job> jobs;
};

// Parses and checks a description document (JSON text); throws Error naming the bad key.
Description parse_description(const std::string& text);

}  // namespace iez::sim
