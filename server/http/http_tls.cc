#include "server/http/http_tls.h"

#include <openssl/ssl.h>

#include <boost/asio/ssl.hpp>

#include "absl/strings/str_cat.h"
#include "server/tls_files.h"

namespace infer {
namespace {

namespace ssl = boost::asio::ssl;

absl::Status Bad(const char* what, const std::string& file, const boost::system::error_code& ec) {
  return absl::InvalidArgumentError(
      absl::StrCat("cannot use the ", what, " '", file, "': ", ec.message()));
}

}  // namespace

absl::StatusOr<std::shared_ptr<ssl::context>> MakeServerTlsContext(
    const std::string& cert_file, const std::string& key_file, const std::string& client_ca_file) {
  absl::StatusOr<std::optional<TlsPem>> pem = ReadTlsFiles(cert_file, key_file, client_ca_file);
  if (!pem.ok()) return pem.status();
  if (!pem->has_value()) {
    return absl::InvalidArgumentError(
        "TLS needs both the certificate (--tls-cert-file) and the private key (--tls-key-file)");
  }
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                       ssl::context::single_dh_use,
                   ec);
  if (ec) return Bad("TLS options", "", ec);
  const TlsPem& files = **pem;
  if (ctx->use_certificate_chain(boost::asio::buffer(files.cert_chain), ec); ec) {
    return Bad("TLS certificate", cert_file, ec);
  }
  if (ctx->use_private_key(boost::asio::buffer(files.private_key), ssl::context::pem, ec); ec) {
    return Bad("TLS private key", key_file, ec);
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the TLS private key '", key_file, "' is not the key of '", cert_file, "'"));
  }
  if (!files.client_ca.empty()) {
    if (ctx->add_certificate_authority(boost::asio::buffer(files.client_ca), ec); ec) {
      return Bad("TLS client CA", client_ca_file, ec);
    }
    // The CAs a client is told to pick its certificate from.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(client_ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(ctx->native_handle(), names);
    }
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
    if (ec) return Bad("TLS client CA", client_ca_file, ec);
  }
  return ctx;
}

}  // namespace infer
