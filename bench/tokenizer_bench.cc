// tokenizer-bench: what tokenisation costs the thread that runs it. The
// engine tokenises a text request during admission, on the submitting
// (gRPC) thread, because the request's length class is chosen by its token
// count before it is queued; this measures that cost per sentence, for
// sentences of several lengths, on one thread, so it can be set against
// the rest of a request's path (bench/frontend_overhead.py) and the
// encoder's time per sequence (encoder-bench).
//
//   build/bin/tokenizer-bench --tokenizer FILE|FOLDER [--words 8,32,128,384] [--seconds 1]
//
// The tokenizer: a tokenizer.json, a model folder (as the server loads it:
// tokenizer.json, else vocab.txt), or --vocab FILE (a BERT vocab.txt).
//
// With --corpus FILE (texts, one per line) it encodes every line of the
// corpus instead, with the special tokens, for --rounds rounds, on --threads
// threads (default 1), and prints one JSON line: lines, tokens, and the best
// round's seconds, tokens and lines per second. By default it takes the ids
// alone (the server's path); --full builds the whole encoding, as Hugging
// Face's encode_batch does (bench/tokenizer_vs_hf.py compares the two).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "models/text/hf_tokenizer.h"
#include "models/text/load_tokenizer.h"

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

// A tokenizer.json or model folder (`path`), or a vocab.txt (`vocab`).
std::unique_ptr<infer::text::HfTokenizer> Load(const std::string& path, const std::string& vocab) {
  absl::StatusOr<std::unique_ptr<infer::text::HfTokenizer>> t =
      vocab.empty() ? infer::text::LoadTokenizer(path)
                    : infer::text::BertTokenizerFromVocab(vocab, {});
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", std::string(t.status().message()).c_str());
    return nullptr;
  }
  return *std::move(t);
}

// Every line of `corpus_path` through `hf`, `rounds` times, on `threads`
// threads (each takes every threads-th line). `full`: the whole Encoding
// (ids, type ids, tokens, offsets, masks: what Hugging Face's encode_batch
// returns); otherwise the ids alone, the serving path.
int CorpusBench(const infer::text::HfTokenizer* hf, const std::string& corpus_path, int rounds,
                int threads, bool full) {
  std::ifstream in(corpus_path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  if (lines.empty()) {
    std::fprintf(stderr, "no lines in %s\n", corpus_path.c_str());
    return 1;
  }
  auto encode_share = [&](int part, size_t* tokens) {
    size_t n = 0;
    for (size_t i = part; i < lines.size(); i += threads) {
      if (full) {
        auto e = hf->Encode(lines[i], std::nullopt, infer::text::EncodeOptions{});
        if (e.ok()) n += e->size();
      } else {
        auto ids = hf->EncodeIds(lines[i], std::nullopt);  // the special tokens included
        if (ids.ok()) n += ids->size();
      }
    }
    *tokens = n;
  };
  double best = 1e30;
  size_t tokens = 0;
  for (int r = 0; r < rounds; ++r) {
    std::vector<size_t> counts(threads, 0);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(encode_share, t, &counts[t]);
    encode_share(0, &counts[0]);
    for (std::thread& t : pool) t.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
    tokens = 0;
    for (size_t c : counts) tokens += c;
  }
  std::printf(
      "{\"lines\": %zu, \"tokens\": %zu, \"threads\": %d, \"seconds\": %.6f, "
      "\"tokens_per_s\": %.0f, \"lines_per_s\": %.0f}\n",
      lines.size(), tokens, threads, best, static_cast<double>(tokens) / best,
      static_cast<double>(lines.size()) / best);
  return 0;
}

int main(int argc, char** argv) {
  std::string vocab, tokenizer_path, corpus;
  std::vector<int> words = {8, 32, 128, 384};
  double seconds = 1.0;
  int rounds = 3;
  int threads = 1;
  bool full = false;
  CLI::App app{
      "tokenizer-bench: tokenizer cost on one thread (per sentence), or over a corpus on one or "
      "more threads"};
  app.add_option("--tokenizer", tokenizer_path,
                 "a tokenizer.json, or a model folder (its tokenizer.json, else vocab.txt)");
  app.add_option("--vocab", vocab, "a BERT vocab.txt (instead of --tokenizer)");
  app.add_option("--words", words, "words per sentence")->delimiter(',');
  app.add_option("--seconds", seconds, "time per point")->capture_default_str();
  app.add_option("--corpus", corpus, "texts, one per line");
  app.add_option("--rounds", rounds, "passes over the corpus; the best is reported")
      ->capture_default_str();
  app.add_option("--threads", threads, "threads sharing the corpus")->capture_default_str();
  app.add_flag("--full", full,
               "the whole encoding (ids, type ids, tokens, offsets, masks), as Hugging Face's "
               "encode_batch returns it; default: the ids alone, as the server needs them");
  CLI11_PARSE(app, argc, argv);
  if (tokenizer_path.empty() == vocab.empty()) {
    std::fprintf(stderr, "one of --tokenizer and --vocab is required\n");
    return 2;
  }
  const std::unique_ptr<infer::text::HfTokenizer> tokenizer = Load(tokenizer_path, vocab);
  if (tokenizer == nullptr) return 1;
  if (!corpus.empty()) {
    return CorpusBench(tokenizer.get(), corpus, std::max(1, rounds), std::max(1, threads), full);
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
        auto ids = tokenizer->EncodeIds(text, std::nullopt);
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
