// The command line of `cudakit`: CLI11 parses it (each registered subcommand declares its
// own options), the chosen subcommand runs, and every error becomes one exit code and one
// message on stderr, plus a JSON object on stdout when the command was asked for JSON:
//
//   {"error": "no CUDA driver: ...", "exit_code": 2}
//
// Help (`--help` on the command or any subcommand) and `--version` go to stdout and exit 0.
#pragma once

#include <string>
#include <vector>

namespace cudakit::tool {

/// Runs the command with `args` (argv without the program name); returns the exit code.
int run_command_line(const std::vector<std::string>& args);

}  // namespace cudakit::tool
