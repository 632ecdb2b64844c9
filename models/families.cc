// The registry's table (models/registry.h): every model family, one line
// each. A family's ModelFamily is defined in its own folder.
#include "models/registry.h"

namespace infer {

extern const ModelFamily kBertFamily;         // models/bert/bert_family.cc
extern const ModelFamily kEmbedPoolFamily;    // models/embed_pool/embed_pool_family.cc
extern const ModelFamily kIdentityFamily;     // models/identity/identity_family.cc
extern const ModelFamily kTransformerFamily;  // models/bert/bert_family.cc

absl::Span<const ModelFamily* const> ModelFamilies() {
  static const ModelFamily* const kFamilies[] = {
      &kBertFamily,
      &kEmbedPoolFamily,
      &kIdentityFamily,
      &kTransformerFamily,
  };
  return kFamilies;
}

}  // namespace infer
