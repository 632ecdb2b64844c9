// tokenizer-bench: what tokenisation costs the thread that runs it. The
// engine tokenises a text request during admission, on the submitting
// (gRPC) thread, because the request's length class is chosen by its token
// count before it is queued; this measures that cost per sentence, for
// sentences of several lengths, on one thread, so it can be set against
// the rest of a request's path (bench/frontend_overhead.py) and the
// encoder's time per sequence (encoder-bench).
//
//   build/bin/tokenizer-bench --vocab DIR/vocab.txt [--words 8,32,128,384] [--seconds 1]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "models/text/wordpiece.h"

namespace {

// English prose with punctuation, numbers, capitals and a few long words
// that split into several pieces.
std::string Sentence(int words) {
  static const char* const kWords[] = {
      "The",   "quick",        "brown",     "fox,",         "running",  "across",
      "2024",  "embeddings",   "servers",   "tokenisation", "isn't",    "always",
      "cheap", "Unbelievably", "so",        "we",           "measure",  "it.",
      "GPUs",  "batch",        "requests;", "latency",      "matters!", "naïve"};
  std::string s;
  for (int i = 0; i < words; ++i) {
    if (i > 0) s += ' ';
    s += kWords[(i * 7 + 3) % (sizeof(kWords) / sizeof(kWords[0]))];
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string vocab;
  std::vector<int> words = {8, 32, 128, 384};
  double seconds = 1.0;
  CLI::App app{"tokenizer-bench: WordPiece cost per sentence on one thread"};
  app.add_option("--vocab", vocab, "vocab.txt of the model")->required();
  app.add_option("--words", words, "words per sentence")->delimiter(',');
  app.add_option("--seconds", seconds, "time per point")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto tokenizer = infer::WordPieceTokenizer::FromVocabFile(vocab, {});
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tokenizer.status().message()).c_str());
    return 1;
  }
  std::printf("| words | bytes | tokens | us per sentence | ns per token |\n");
  std::printf("|---:|---:|---:|---:|---:|\n");
  for (int w : words) {
    const std::string text = Sentence(w);
    size_t tokens = 0;
    int64_t n = 0;
    const auto t0 = std::chrono::steady_clock::now();
    auto t1 = t0;
    do {
      for (int i = 0; i < 64; ++i) {
        auto ids = (*tokenizer)->Encode(text);
        if (!ids.ok()) return 1;
        tokens = ids->size();
      }
      n += 64;
      t1 = std::chrono::steady_clock::now();
    } while (std::chrono::duration<double>(t1 - t0).count() < seconds);
    const double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
    std::printf("| %d | %zu | %zu | %.1f | %.0f |\n", w, text.size(), tokens, us,
                us * 1000.0 / static_cast<double>(tokens));
  }
  return 0;
}
