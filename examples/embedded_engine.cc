// Embedding the inference engine in a C++ service, with no gRPC involved:
// create an engine on a device, load a model, submit requests from several
// threads, and read the answers and the model's statistics.
//
//   build/bin/embedded_engine [cpu|cuda:0]
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "infer/engine/engine.h"
#include "infer/models/embed_pool/embed_pool.h"

int main(int argc, char** argv) {
  infer::EngineOptions options;
  options.device = argc > 1 ? argv[1] : "";  // empty: GPU if usable, else CPU
  auto engine = infer::Engine::Create(options);
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  auto model = infer::EmbedPoolModel::Create(infer::EmbedPoolOptions{}, (*engine)->context());
  if (!model.ok()) {
    std::fprintf(stderr, "model: %s\n", model.status().ToString().c_str());
    return 1;
  }
  infer::QueueOptions batching;
  batching.max_batch_size = 16;
  batching.max_queue_delay = absl::Milliseconds(2);
  if (absl::Status s = (*engine)->AddModel(*std::move(model), batching); !s.ok()) {
    std::fprintf(stderr, "add model: %s\n", s.ToString().c_str());
    return 1;
  }

  // 64 requests of one sequence each, from 8 threads at once: the batcher
  // groups them into far fewer executions.
  constexpr int kThreads = 8, kPerThread = 8;
  std::vector<std::vector<float>> first(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        infer::InferRequest request;
        request.model_name = "embed_pool";
        infer::Tensor ids;
        ids.name = "input_ids";
        ids.dtype = infer::DataType::kInt64;
        const std::vector<int64_t> tokens = {101, 2000 + t, 3000 + i, 102};
        ids.shape = {1, static_cast<int64_t>(tokens.size())};
        ids.data.assign(reinterpret_cast<const char*>(tokens.data()),
                        tokens.size() * sizeof(int64_t));
        request.inputs.push_back(std::move(ids));
        absl::StatusOr<infer::InferResponse> response = (*engine)->Infer(std::move(request));
        if (!response.ok()) {
          std::fprintf(stderr, "infer: %s\n", response.status().ToString().c_str());
          std::exit(1);
        }
        if (i == 0) {
          const infer::Tensor& e = response->outputs.at(0);
          first[t].assign(e.as<float>(), e.as<float>() + e.shape[1]);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();

  std::printf("device: %s\n", (*engine)->device()->spec().c_str());
  std::printf("embedding of request 0 (first 4 of %zu): %.4f %.4f %.4f %.4f\n", first[0].size(),
              first[0][0], first[0][1], first[0][2], first[0][3]);
  const infer::ModelStats stats = *(*engine)->GetModelStats("embed_pool");
  std::printf("requests answered: %llu in %llu batched executions\n",
              static_cast<unsigned long long>(stats.inference_count),
              static_cast<unsigned long long>(stats.execution_count));
  (*engine)->Shutdown();
  return 0;
}
