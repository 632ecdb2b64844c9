// TEI's command line and environment (text-embeddings-router's options, by
// their names and environment variables), so that a deployment written for
// TEI starts this server by changing the image. Each option either maps to
// one of this server's (README, "TEI's command line"), or is accepted and
// has no effect here, with a line in the log saying why.
//
// TEI's defaults are not this server's: TEI listens on 0.0.0.0:3000 and
// Prometheus on 0.0.0.0:9000; this server on loopback 8000 and 8002. Only
// what is given is translated: --port (or PORT) listens on every address
// unless --hostname says otherwise, as TEI's does; nothing given, nothing
// changes.
//
// Two options for one port are refused as ambiguous: --http-address with
// --port, --metrics-address with --prometheus-port. --hostname is the host
// of the HTTP and metrics ports whose address is not given.
#ifndef INFER_SERVER_TEI_FLAGS_H_
#define INFER_SERVER_TEI_FLAGS_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/server_flags.h"

namespace infer {

// Adds TEI's options that have no native name here (the others are
// AddServerFlags' own options under a second name or environment variable).
void AddTeiFlags(CLI::App* app, ServerFlags* flags);

// After parsing: turns the TEI options given into this server's (addresses,
// limits, threads, the cache, the token), and says in `notes` what each
// accepted-but-unused option means here. INVALID_ARGUMENT naming the options
// for a conflict or a value this server cannot honour. `app` tells what was
// given on the command line or in the environment.
absl::Status ApplyTeiFlags(const CLI::App& app, ServerFlags* flags,
                           std::vector<std::string>* notes);

}  // namespace infer

#endif  // INFER_SERVER_TEI_FLAGS_H_
