// spmd-train — trains one of two exactly specified models (tools/train/mlp.hpp, gpt.hpp) from
// a safetensors file of initial parameters and one of data, and prints the loss of every step
// (docs/training.md; the flags and the JSON fields are a contract):
//
//   spmd-train --model mlp|gpt [--mesh M] [--backend sim|mpi|cuda|nccl] [--dp fsdp|ddp | --parallel auto [--cost FILE] [--memory BYTES]]
//              --init INIT.safetensors --data DATA.safetensors --steps N
//              [--optimizer adamw|sgd] [--lr LR] [--dtype f32|bf16] [--clip C]
//              [--save OUT.safetensors] [--checkpoint CK.safetensors --checkpoint-at K]
//              [--resume CK.safetensors] [--schedule gpipe|1f1b|interleaved|zb] [--microbatches M] [--graph] [--json]
//
// The mesh is N (data parallel over N), DxT (data x tensor parallel) or dp=D,tp=T,cp=C,pp=P (any
// order, a dim left out of size 1; cp: context parallel, the gpt's positions split; pp: the
// gpt's pieces in pipeline stages, run by --schedule over --microbatches), any sizes
// the model can be split over (T divides the gpt's heads, the mlp's hidden features; C the
// gpt's context): one build trains on every mesh (the sizes are run-time values). --backend mpi
// and nccl run under `mpirun -np D*T*C*P`, where --mesh may be left out (a 1-d mesh of the world size); the first
// process prints. Exit codes: 0 success, 2 bad input (a flag, a mesh the model cannot be split
// over, a file that does not fit the model, an output in a directory that is missing or not
// writable; nothing is written), 1 an unexpected failure. Errors go to stderr.
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "spmd/core/mesh.hpp"
#include "spmd/io/cost_file.hpp"
#include "spmd/io/safetensors.hpp"
#include "spmd/plan/pipeline_program.hpp"
#ifdef SPMD_TRAIN_MPI
#include "spmd/backends/mpi/environment.hpp"
#endif
#ifdef SPMD_TRAIN_CUDA
#include "spmd/backends/cuda/device.hpp"
#endif
#ifdef SPMD_TRAIN_NCCL
#include "spmd/backends/nccl/environment.hpp"
#endif

#include "train/inputs.hpp"
#include "train/instances.hpp"
#include "train/report.hpp"

namespace {

using namespace spmd_train;

constexpr int exit_bad_input = 2;
constexpr int exit_diverged = 3;  // a loss or gradient norm went non-finite (docs/training.md)

/// Under mpirun every process parses the same flags: only the first reports a usage error.
bool first_process() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* r = std::getenv(v)) return std::string(r) == "0";
  return true;
}

/// The sizes of --mesh N, DxT or the named form dp=D,tp=T,cp=C (any order, a dim left out of
/// size 1); each 1..999999, their product at most max_mesh_ranks.
void parse_mesh(train_options& o) {
  const std::string& m = o.mesh;
  auto number = [&](const std::string& s) {
    if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoi(s);
  };
  if (m.find('=') != std::string::npos) {
    o.dp = o.tp = o.cp = o.pp = 1;
    bool seen[4] = {};
    std::size_t at = 0;
    while (at <= m.size()) {
      const std::size_t end = std::min(m.find(',', at), m.size());
      const std::string part = m.substr(at, end - at);
      const auto eq = part.find('=');
      const std::string name = part.substr(0, eq == std::string::npos ? part.size() : eq);
      const int size = eq == std::string::npos ? -1 : number(part.substr(eq + 1));
      const int which = name == "dp" ? 0 : name == "tp" ? 1 : name == "cp" ? 2 : name == "pp" ? 3 : -1;
      if (which < 0)
        throw usage_error("--mesh " + m + ": '" + part + "' names no mesh dim; the dims are dp (data), tp (tensor), "
                          "cp (context parallel) and pp (pipeline): dp=D,tp=T,cp=C,pp=P in any order");
      if (seen[which]) throw usage_error("--mesh " + m + ": " + name + " is given twice");
      if (size < 1)
        throw usage_error("--mesh " + m + ": " + name + " needs a size from 1 to 999999 (" + name + "=N), not '" +
                          part + "'");
      seen[which] = true;
      (which == 0 ? o.dp : which == 1 ? o.tp : which == 2 ? o.cp : o.pp) = size;
      at = end + 1;
    }
  } else {
    const auto x = m.find('x');
    o.dp = number(x == std::string::npos ? m : m.substr(0, x));
    o.tp = x == std::string::npos ? 1 : number(m.substr(x + 1));
    o.cp = 1;
    if (o.dp < 1 || o.tp < 1)
      throw usage_error("--mesh " + m + ": give N (data parallel over N), DxT (data parallel over D, tensor "
                        "parallel over T) or dp=D,tp=T,cp=C, each a size from 1 to 999999");
  }
  const long long ranks = static_cast<long long>(o.dp) * o.tp * o.cp * o.pp;
  if (ranks > spmd::max_mesh_ranks)
    throw usage_error("--mesh " + m + ": " + std::to_string(ranks) + " ranks, more than a mesh holds (" +
                      std::to_string(spmd::max_mesh_ranks) + ")");
}

/// Context parallelism splits a sequence's positions: the gpt's context into cp equal pieces
/// (cp divides it); the mlp has no sequence.
void check_cp(const train_options& o, const model_spec& spec) {
  if (o.cp == 1) return;
  if (spec.context == 0)
    throw usage_error("--mesh " + o.mesh + ": context parallel over " + std::to_string(o.cp) + " splits a sequence; the " +
                      o.model + " has none (cp must be 1)");
  if (spec.context % o.cp != 0)
    throw usage_error("--mesh " + o.mesh + ": context parallel over " + std::to_string(o.cp) + " does not divide the " +
                      std::to_string(spec.context) + " positions of the " + o.model + " (C must divide " +
                      std::to_string(spec.context) + ")");
  if (!o.parallel.empty())
    throw usage_error("--mesh " + o.mesh + ": --parallel auto searches meshes without context parallelism (cp = 1); "
                      "give --dp fsdp or ddp with cp = " + std::to_string(o.cp));
}

/// Pipeline parallelism cuts the gpt into its pieces (the embedding, 2 blocks, the head) in
/// pp·v equal stages: gpipe, 1f1b and zb one stage per pipeline rank, interleaved pieces/pp;
/// the batch into microbatches of equal size. The sim and mpi backends, f32.
void check_pp(train_options& o, const model_spec& spec) {
  o.pipelined = o.pipelined || o.pp > 1;
  if (!o.pipelined) return;
  spmd::pp::schedule_kind k{};
  if (!spmd::pp::parse_schedule(o.schedule, k))
    throw usage_error("--schedule " + o.schedule + ": choose one of gpipe, 1f1b, interleaved, zb");
  if (o.model != "gpt")
    throw usage_error("--mesh " + o.mesh + ": pipeline parallelism cuts the gpt into stages; the " + o.model +
                      " is not cut (pp must be 1, without --schedule and --microbatches)");
  if (o.microbatches < 1 || spec.batch % o.microbatches != 0 || (o.microbatches & (o.microbatches - 1)) != 0)
    throw usage_error("--microbatches " + std::to_string(o.microbatches) + " does not divide the gpt's batch of " +
                      std::to_string(spec.batch) + " (give 1, 2, 4 or 8)");
  const int pieces = 4;  // nn::gpt_pieces of spmd-train's 2 blocks
  if (pieces % o.pp != 0)
    throw usage_error("--mesh " + o.mesh + ": the gpt's " + std::to_string(pieces) +
                      " pieces (the embedding, 2 blocks, the head) cannot be cut into " + std::to_string(o.pp) +
                      " equal pipeline stages (pp is 1, 2 or 4)");
  if (o.backend != "sim" && o.backend != "mpi")
    throw usage_error("--backend " + o.backend + ": pipeline parallelism runs on the host backends (sim, mpi) for now");
  if (o.dtype != "f32") throw usage_error("--dtype " + o.dtype + ": pipeline parallelism trains in f32 for now");
  if (!o.parallel.empty()) throw usage_error("--parallel auto searches meshes without pipeline parallelism (pp = 1)");
}

/// Tensor parallelism over tp ranks splits units of the model: whole heads (tp divides them),
/// hidden features (tp at most their number).
void check_tp(const train_options& o, const model_spec& spec) {
  const std::string units = std::to_string(spec.tp_units) + " " + spec.tp_unit_name + " of " + o.model;
  if (spec.tp_divides && spec.tp_units % o.tp != 0)
    throw usage_error("--mesh " + o.mesh + ": tensor parallel over " + std::to_string(o.tp) + " does not divide the " +
                      units + " (T must divide " + std::to_string(spec.tp_units) + ")");
  if (!spec.tp_divides && o.tp > spec.tp_units)
    throw usage_error("--mesh " + o.mesh + ": tensor parallel over " + std::to_string(o.tp) + " is more than the " +
                      units + " (T is at most " + std::to_string(spec.tp_units) + ")");
}

/// A file the run will write (--save, --checkpoint), checked before anything trains: a
/// directory that is missing or not writable, or a target that is not a regular file (a
/// device, a FIFO: host/output_file.hpp refuses to replace it) would otherwise fail the run
/// at its end, with its work lost. (Under MPI every process checks: only the first reports.)
void check_output(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  spmd::host::write_target t;
  try {
    t = spmd::host::resolve_output(path, spmd::host::write_use::file);
  } catch (const spmd::host::file_error& e) {
    throw usage_error(flag + " " + e.what());
  }
  const std::string dir = spmd::host::folder_of(t.path);
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw usage_error(flag + " " + path + ": the directory " + dir + " is not writable");
}

/// --resume's file: readable, and a checkpoint of this model, not of the other one (whose
/// parameter names it holds instead).
void check_resume(const train_options& o) {
  const spmd::io::safetensors_file f(o.resume);
  auto holds = [&](const model_spec& m) {
    for (const param_spec& p : m.params)
      if (!f.contains(p.name)) return false;
    return true;
  };
  if (holds(spec_of(o.model))) return;  // load_training_state checks the rest
  for (const char* other : {"mlp", "gpt"})
    if (o.model != other && holds(spec_of(other)))
      throw usage_error("--resume " + o.resume + ": is a checkpoint of the " + other + " model; this run trains the " +
                        o.model + " (--model " + other + " resumes it)");
}

void check(train_options& o) {
  auto one_of = [](const std::string& flag, const std::string& v, std::initializer_list<const char*> ok) {
    std::string list;
    for (const char* k : ok) {
      if (v == k) return;
      list += std::string(list.empty() ? "" : ", ") + k;
    }
    throw usage_error(flag + " " + v + ": choose one of " + list);
  };
  one_of("--model", o.model, {"mlp", "gpt"});
  one_of("--backend", o.backend, {"sim", "mpi", "cuda", "nccl"});
  one_of("--dp", o.dp_mode, {"fsdp", "ddp"});
  one_of("--dtype", o.dtype, {"f32", "bf16"});
  one_of("--cp-method", o.cp_method, {"all_gather", "ring"});
  if (o.cp_method == "ring") {
    if (o.dtype != "f32") throw usage_error("--cp-method ring computes in f32: leave out --dtype " + o.dtype);
    if (o.model != "gpt") throw usage_error("--cp-method ring: the " + o.model + " has no attention");
  }
  if (!o.parallel.empty()) {
    one_of("--parallel", o.parallel, {"auto"});
    if (o.dp_given)
      throw usage_error("--parallel auto chooses how the data-parallel dim holds the parameters: leave out --dp " + o.dp_mode);
    if (o.dtype == "bf16")
      throw usage_error("--parallel auto trains in f32 (bf16 is FSDP's mixed precision: use --dp fsdp --dtype bf16)");
  } else if (!o.cost.empty()) {
    throw usage_error("--cost " + o.cost + " is the cost model of --parallel auto's search: give --parallel auto");
  } else if (o.memory) {
    throw usage_error("--memory " + number_text(*o.memory) + " is the memory budget of --parallel auto's search: give --parallel auto");
  }
  if (o.memory && (!(*o.memory > 0) || !std::isfinite(*o.memory)))
    throw usage_error("--memory " + number_text(*o.memory) + ": give the bytes a rank may hold, a number > 0");
  one_of("--optimizer", o.optimizer, {"adamw", "sgd"});
  if (o.graph && o.backend != "cuda")
    throw usage_error("--graph captures a step as one CUDA graph: it needs --backend cuda (not " + o.backend + ")");
  if (o.mesh.empty()) {
    if (o.backend != "mpi" && o.backend != "nccl")
      throw usage_error("--mesh is required with --backend " + o.backend +
                        " (only under mpirun, with --backend mpi or nccl, does the world size give it)");
  } else {
    parse_mesh(o);
  }
  if (o.shuffle && *o.shuffle < 0)
    throw usage_error("--shuffle " + std::to_string(*o.shuffle) + ": the seed is a number from 0");
  if (o.steps < 1) throw usage_error("--steps " + std::to_string(o.steps) + ": train at least one step");
  if (!(o.lr > 0) || !std::isfinite(o.lr)) throw usage_error("--lr " + number_text(o.lr) + ": must be positive");
  if (o.clip && (!(*o.clip > 0) || !std::isfinite(*o.clip)))
    throw usage_error("--clip " + number_text(*o.clip) + ": must be positive");
  if (o.dtype == "bf16" && o.dp_mode == "ddp")
    throw usage_error("--dtype bf16 is FSDP's mixed precision (bf16 compute, f32 reduction and parameters): use it "
                      "with --dp fsdp");
  if (o.checkpoint.empty() != !o.checkpoint_at)
    throw usage_error("--checkpoint and --checkpoint-at go together: the file and the step after which it is written");
  if (o.checkpoint_at && (*o.checkpoint_at < 1 || *o.checkpoint_at > o.steps))
    throw usage_error("--checkpoint-at " + std::to_string(*o.checkpoint_at) + ": must be a step in 1.." +
                      std::to_string(o.steps));
  check_output("--save", o.save);
  check_output("--checkpoint", o.checkpoint);
  if (!o.mesh.empty()) check_tp(o, spec_of(o.model)), check_cp(o, spec_of(o.model));
  check_pp(o, spec_of(o.model));
}

int run(train_options& o, int& argc, char**& argv) {
  check(o);
  const train_fn fn = find_instance(o.pipelined ? "gpt_pipeline" : o.model, o.backend);
  if (!fn)
    throw usage_error("--backend " + o.backend + ": this build of spmd-train has " + backends_built() +
                      " (docs/training.md says how to build the others)");
  const model_spec spec = spec_of(o.model);
  inputs in = read_inputs(o, spec);
  if (!o.resume.empty()) check_resume(o);  // readable, and of this model, before anything runs
  auto train_and_report = [&] {
    if (!o.cost.empty()) {  // the file's mesh is --mesh as written: N (one dim), DxT or named (dp, tp)
      const bool one_dim = o.mesh.find('x') == std::string::npos && o.mesh.find('=') == std::string::npos;
      const spmd::mesh_shape_vec shape = one_dim ? spmd::mesh_shape_vec{{o.dp}, 1} : spmd::mesh_shape_vec{{o.dp, o.tp}, 2};
      try {
        o.cost_model = spmd::io::load_cost_model(o.cost, shape);
      } catch (const std::exception& e) {
        throw usage_error(std::string("--cost ") + e.what());
      }
    }
    if (o.memory) o.cost_model.memory_budget = *o.memory;
    in.loader = make_loader(o, spec);  // over o.dp ranks: under mpirun without --mesh, known only now
    const train_result r = fn(o, in, spec);
    if (r.prints) print_result(o, r);
    if (const std::int64_t step = first_non_finite(r)) {  // diverged: scripts must notice
      if (r.prints) warn_non_finite(r, step);
      return exit_diverged;
    }
    return 0;
  };
  if (o.backend == "mpi" || o.backend == "nccl") {
#ifdef SPMD_TRAIN_MPI
    auto body = [&](int world, int rank) {
      if (o.mesh.empty()) {  // the world size: a 1-d mesh, data parallel over every process
        o.mesh = std::to_string(world);
        o.dp = world;
        o.tp = o.cp = o.pp = 1;
      }
      const long long ranks = static_cast<long long>(o.dp) * o.tp * o.cp * o.pp;
      if (world != ranks) {
        if (rank == 0)
          std::fprintf(stderr, "spmd-train: --mesh %s needs %lld processes (mpirun -np %lld), this job has %d\n",
                       o.mesh.c_str(), ranks, ranks, world);
        return exit_bad_input;
      }
      try {
        return train_and_report();
      } catch (const std::exception& e) {
        // Refused on every process (a checkpoint of another optimizer): one line, from the
        // first, and a clean exit; a failure on some processes only ends the job (MPI_Abort).
        spmd::mpi::end_job("spmd-train: ", e.what(),
                           dynamic_cast<const usage_error*>(&e) || dynamic_cast<const spmd::host::file_error*>(&e)
                               ? exit_bad_input
                               : 1);
      }
    };
#ifdef SPMD_TRAIN_NCCL
    if (o.backend == "nccl") {
      spmd::nccl::environment env(argc, argv);
      return body(spmd::mpi::environment::size(), spmd::mpi::environment::rank());
    }
#endif
    spmd::mpi::environment env(argc, argv);
    return body(spmd::mpi::environment::size(), spmd::mpi::environment::rank());
#endif
  }
#ifdef SPMD_TRAIN_CUDA
  if (o.backend == "cuda") spmd::cuda::require_device("spmd-train --backend cuda");
#endif
  return train_and_report();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spmd-train: train the mlp or gpt model on a device mesh and print every step's loss "
               "(docs/training.md)"};
  train_options o;
  app.add_option("--model", o.model, "mlp or gpt")->required();
  app.add_option("--mesh", o.mesh, "1, N (data parallel), DxT (data x tensor parallel; T divides the gpt's 4 heads, "
                                  "T <= the mlp's 64 hidden features) or dp=D,tp=T,cp=C,pp=P (any order, a dim left out is 1; "
                                  "C, context parallel, divides the gpt's 16 positions; P, pipeline stages, is 1, 2 or 4); "
                                  "under mpirun it may be left out: N = the world size");
  app.add_option("--backend", o.backend, "sim (default), mpi, cuda or nccl (mpi, nccl: under mpirun -np D*T*C)");
  app.add_option("--dp", o.dp_mode, "fsdp (default) or ddp: how the data-parallel dim holds the parameters");
  app.add_option("--schedule", o.schedule, "gpipe, 1f1b (default), interleaved or zb (ZB-H1): the pipeline's schedule "
                 "(docs/pipeline.md)")
      ->each([&](const std::string&) { o.pipelined = true; });
  app.add_option("--microbatches", o.microbatches, "1 (default), 2, 4 or 8: the batch cut into microbatches that "
                 "run through the pipeline's stages one after another")
      ->each([&](const std::string&) { o.pipelined = true; });
  app.add_option("--cp-method", o.cp_method, "all_gather (default) or ring: how the gpt's attention reaches the keys "
                 "of the other ranks of cp (ring: f32)");
  app.add_option("--parallel", o.parallel, "auto: the automatic-sharding search chooses FSDP, DDP (each with "
                 "Megatron's plan on tp) or replicating everything, by its cost model on this mesh (instead of --dp)");
  app.add_option("--cost", o.cost, "with --parallel auto: the cost model measured on this machine (bench/auto_calibrate "
                 "writes it for the mesh); default: docs/auto.md's");
  app.add_option("--memory", o.memory, "with --parallel auto: the bytes a rank may hold (parameters, gradients, "
                 "optimizer state, saved activations, as docs/auto.md models them); the search keeps to it");
  app.add_option("--init", o.init, "safetensors file of the initial parameters (f32)")->required();
  app.add_option("--data", o.data, "safetensors file of the samples (gpt: tokens, targets (..., 16) i64; mlp: x "
                 "(..., 32) f32, labels (...) i64), cycled over epochs")->required();
  app.add_option("--steps", o.steps, "steps to train (in all, with --resume)")->required();
  app.add_option("--optimizer", o.optimizer, "adamw (default: betas 0.9, 0.999, eps 1e-8, weight_decay 0.01) or sgd "
                                             "(momentum 0.9)");
  app.add_option("--lr", o.lr, "learning rate (default 0.01)");
  app.add_option("--dtype", o.dtype, "f32 (default) or bf16 (FSDP mixed precision)");
  app.add_option("--clip", o.clip, "clip the global gradient 2-norm to this before each step");
  app.add_flag("--graph", o.graph, "with --backend cuda: run the first step eagerly, capture the second as one CUDA "
                                   "graph and replay it for every later step (the same losses, bit for bit)");
  app.add_option("--save", o.save, "write the final parameters (f32) here");
  app.add_option("--checkpoint", o.checkpoint, "write the training state here after --checkpoint-at steps");
  app.add_option("--checkpoint-at", o.checkpoint_at, "the step after which --checkpoint is written");
  app.add_option("--resume", o.resume, "continue from this training state, on any mesh");
  app.add_option("--shuffle", o.shuffle, "shuffle DATA's samples each epoch, seeded with this + the epoch "
                 "(default: DATA's order)");
  app.add_flag("--json", o.json, "print one JSON object");
  try {
    app.parse(argc, argv);
    o.dp_given = app.count("--dp") > 0;
  } catch (const CLI::ParseError& e) {
    // --help and friends exit 0 with their text on stdout; every usage error exits 2 with the
    // tool's name, as the checks after parsing do (once, on the first of several processes).
    if (e.get_exit_code() == 0) return app.exit(e);
    if (first_process())
      std::fprintf(stderr, "spmd-train: %s\nRun 'spmd-train --help' for more information.\n", e.what());
    return exit_bad_input;
  }
  try {
    return run(o, argc, argv);
  } catch (const usage_error& e) {
    if (first_process()) std::fprintf(stderr, "spmd-train: %s\n", e.what());
    return exit_bad_input;
  } catch (const spmd::host::file_error& e) {  // io::checkpoint_error too: a file read or written
    if (first_process()) std::fprintf(stderr, "spmd-train: %s\n", e.what());
    return exit_bad_input;
  } catch (const std::invalid_argument& e) {
    if (first_process()) std::fprintf(stderr, "spmd-train: %s\n", e.what());
    return exit_bad_input;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spmd-train: %s\n", e.what());
    return 1;
  }
}
