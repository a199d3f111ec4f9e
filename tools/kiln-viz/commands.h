#pragma once
// kiln-viz's subcommands, one file each: each parses its own flags (argv[0]
// is the subcommand's name) and returns the exit status; failures are thrown
// (cli::UsageError, kiln::Error) and turned into one line by run_tool.
namespace kiln::viz {

int train_command(int argc, char** argv);
int attention_command(int argc, char** argv);
int positions_command(int argc, char** argv);
int bench_command(int argc, char** argv);

}  // namespace kiln::viz
