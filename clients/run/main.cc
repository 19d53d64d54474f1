// Stand-alone entry point of `kiln run` (also reachable as `kiln run`).
#include "clients/run/run_command.h"

int main(int argc, char** argv) { return kiln::RunCommand(argc, argv); }
