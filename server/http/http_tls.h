// The HTTP transport's TLS context, from the same PEM files as the gRPC
// server's TLS options (--tls-cert-file, --tls-key-file,
// --tls-client-ca-file): OpenSSL through Boost.Asio's ssl::context, TLS 1.2
// and 1.3 only, with mutual TLS when a client CA is given.
//
// Thread-safe: the context is read-only once made.
#ifndef INFER_SERVER_HTTP_HTTP_TLS_H_
#define INFER_SERVER_HTTP_HTTP_TLS_H_

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace infer {

// The server's context: `cert_file` (a PEM certificate chain, the server's
// first) and `key_file` (its PEM private key, which must match), and with
// `client_ca_file` a required client certificate signed by one of its CAs.
// The files are read and checked as the gRPC server's (server/tls_files.h,
// same messages); then INVALID_ARGUMENT naming the file and OpenSSL's reason
// when one is not a certificate or key OpenSSL takes, or the key is not the
// certificate's.
absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> MakeServerTlsContext(
    const std::string& cert_file, const std::string& key_file, const std::string& client_ca_file);

}  // namespace infer

#endif  // INFER_SERVER_HTTP_HTTP_TLS_H_
