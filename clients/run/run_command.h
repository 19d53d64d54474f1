// `kiln run`: loads an ONNX model into the engine, runs it on .npy inputs (or
// random inputs of given shapes), writes the outputs as .npy and prints
// output statistics, latency, kernel count and cost estimates.
#ifndef KILN_CLIENTS_RUN_RUN_COMMAND_H_
#define KILN_CLIENTS_RUN_RUN_COMMAND_H_

namespace kiln {

// argv[0] is "run" (or the program name); returns the process exit code.
int RunCommand(int argc, char** argv);

}  // namespace kiln

#endif  // KILN_CLIENTS_RUN_RUN_COMMAND_H_
