#include "server/tls_files.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the ", what, " file '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", what, " file '", path, "' holds no PEM block"));
  }
  return text.str();
}

}  // namespace

absl::StatusOr<std::optional<TlsPem>> ReadTlsFiles(const std::string& cert_file,
                                                   const std::string& key_file,
                                                   const std::string& client_ca_file) {
  const bool cert = !cert_file.empty(), key = !key_file.empty();
  if (!cert && !key) {
    if (!client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "a TLS client CA needs the server's own certificate and key (--tls-cert-file, "
          "--tls-key-file)");
    }
    return std::nullopt;
  }
  if (cert != key) {
    return absl::InvalidArgumentError(
        "TLS needs both the certificate (--tls-cert-file) and the private key (--tls-key-file)");
  }
  TlsPem pem;
  INFER_ASSIGN_OR_RETURN(pem.cert_chain, ReadPem(cert_file, "TLS certificate"));
  INFER_ASSIGN_OR_RETURN(pem.private_key, ReadPem(key_file, "TLS private key"));
  if (!client_ca_file.empty()) {
    INFER_ASSIGN_OR_RETURN(pem.client_ca, ReadPem(client_ca_file, "TLS client CA"));
  }
  return pem;
}

}  // namespace infer
