// The cudakit command: info, doctor, bench and whatever else registers (command.hpp).
#include <string>
#include <vector>

#include "cli.hpp"

int main(int argc, char** argv) {
  return cudakit::tool::run_command_line(std::vector<std::string>(argv + 1, argv + argc));
}
