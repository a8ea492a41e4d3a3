// iez-sim: simulate a Lustre cluster running jobs, on SimGrid.
//   iez-sim DESCRIPTION.json [-o RESULTS.json] [--cfg=... SimGrid options]
// Bad input prints one line `iez-sim: error: ...` and exits 2.
#include "description.hpp"
#include "engine.hpp"

#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

std::string read_file(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw iez::sim::Error("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text)
{
  if (path == "-") {
    std::cout << text;
    return;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out)
    throw iez::sim::Error("cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv)
{
  // SimGrid consumes its own --cfg/--log options; ours are the rest.
  std::vector<char*> sg_args{argv[0]};
  std::string input, output = "-";
  for (int k = 1; k < argc; k++) {
    std::string a = argv[k];
    if (a == "-o" && k + 1 < argc)
      output = argv[++k];
    else if (a.rfind("--cfg=", 0) == 0 || a.rfind("--log=", 0) == 0)
      sg_args.push_back(argv[k]);
    else if (a == "-h" || a == "--help") {
      std::cout << "usage: iez-sim DESCRIPTION.json [-o RESULTS.json] [--cfg=SIMGRID_OPTION ...]\n";
      return 0;
    } else if (input.empty() && a[0] != '-')
      input = a;
    else {
      std::cerr << "iez-sim: error: unexpected argument " << a << "\n";
      return 2;
    }
  }
  if (input.empty()) {
    std::cerr << "usage: iez-sim DESCRIPTION.json [-o RESULTS.json] [--cfg=SIMGRID_OPTION ...]\n";
    return 2;
  }
  try {
    auto t0  = std::chrono::steady_clock::now();
    auto d   = iez::sim::parse_description(read_file(input));
    std::string quiet = "--log=root.thresh:warning";
    sg_args.insert(sg_args.begin() + 1, quiet.data());
    int sg_argc = static_cast<int>(sg_args.size());
    iez::sim::Engine engine(d, &sg_argc, sg_args.data());
    engine.run();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    write_file(output, engine.results_json(wall));
  } catch (const iez::sim::Error& e) {
    std::cerr << "iez-sim: error: " << input << ": " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "iez-sim: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
