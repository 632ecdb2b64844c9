// The server's --config file (TOML, read by CLI11 into the same options as
// the command line): any text either sets options whose values pass their
// checks or is refused with a CLI::ParseError naming the problem. Nothing
// else may escape: another exception type, a crash, or a value outside its
// checked range.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/server_flags.h"
#include "server/tei_flags.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  infer::ServerFlags flags;
  CLI::App app{infer::kServerDescription, "infer-server"};
  infer::AddServerFlags(&app, &flags);
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    app.parse_from_stream(in);
  } catch (const CLI::ParseError&) {
    return 0;  // refused, as the server would refuse to start
  }
  // TEI's options turned into this server's (or refused as a conflict).
  std::vector<std::string> notes;
  if (!infer::ApplyTeiFlags(app, &flags, &notes).ok()) return 0;
  // (An address is checked when its port starts, as one from the command
  // line is; TEI's --port sets the port of whatever it was given.)
  if (flags.http_threads < 1 || flags.http_threads > 256 ||
      (flags.port > 0 && !absl::EndsWith(flags.http_address, absl::StrCat(":", flags.port)))) {
    __builtin_trap();  // a TEI option made an unusable value
  }
  if (flags.drain_grace_s < 0 || flags.drain_grace_s > 3600 || flags.drain_timeout_s < 0 ||
      flags.drain_timeout_s > 3600 || flags.memory_budget_fraction < 0 ||
      flags.memory_budget_fraction > 1 || flags.memory_headroom_fraction < 0 ||
      flags.memory_headroom_fraction > 0.99 || flags.cpu_threads < 0 ||
      flags.memory_budget_bytes < 0 || flags.max_receive_message_bytes < 1) {
    __builtin_trap();  // a value past its check was accepted
  }
  return 0;
}
