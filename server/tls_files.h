// The TLS files every port shares (--tls-cert-file, --tls-key-file,
// --tls-client-ca-file): read and checked once, with the same messages for
// the gRPC server and the HTTP transport.
//
// Thread-safe (reads files, holds no state).
#ifndef INFER_SERVER_TLS_FILES_H_
#define INFER_SERVER_TLS_FILES_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace infer {

struct TlsPem {
  std::string cert_chain;
  std::string private_key;
  std::string client_ca;  // empty: no client certificate required
};

// The files' contents; nullopt when no TLS is asked for (all three empty).
// INVALID_ARGUMENT when the certificate comes without its key or the other
// way round, when a client CA comes without them, or when a file holds no
// PEM block; NOT_FOUND naming a file that cannot be read.
absl::StatusOr<std::optional<TlsPem>> ReadTlsFiles(const std::string& cert_file,
                                                   const std::string& key_file,
                                                   const std::string& client_ca_file);

}  // namespace infer

#endif  // INFER_SERVER_TLS_FILES_H_
