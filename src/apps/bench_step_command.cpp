// `ringtrain bench step`: one training step of a model, timed phase by phase
// (forward with the loss, backward, optimizer update) on synthetic data of the
// model's input shape, on every rank at once. Reports ms per phase, each
// phase's share and samples/s per rank. The phases are measured in a pass
// where each ends with a stream synchronize; samples/s comes from a second
// pass of the same steps queued back to back, as training runs them, with one
// host wait at the end (and the host syncs it asked for, which should be 0).
// --layers then profiles a few more steps node by node (see profile_layers):
// on a GPU with CUDA events on the model's stream, read after each step, on
// the CPU with a steady clock around each node's call.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include <sched.h>

#include <nlohmann/json.hpp>

#include "apps/command.h"
#include "core/median.h"
#include "core/profiled_region.h"
#include "core/stream_graph.h"
#include "ringtrain/comm/control_channel.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/host_sync.h"
#include "ringtrain/core/interval_timer.h"
#include "ringtrain/core/log.h"
#include "ringtrain/core/timer.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/presets.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/tensor/device_memory.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain::apps {
namespace {

// The cores the ranks of this rank's host may run on: the union of their
// affinity masks (a cpuset, or mpirun binding each rank to a core of its own),
// at least 1. Collective: every rank calls it.
int host_cores(const Topology& topo, Communicator& control) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<double> used(static_cast<std::size_t>(topo.node_count()) * CPU_SETSIZE, 0.0);
  double* mine = used.data() + static_cast<std::size_t>(topo.node()) * CPU_SETSIZE;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) mine[cpu] = 1;
  } else {
    for (unsigned cpu = 0; cpu < std::thread::hardware_concurrency() && cpu < CPU_SETSIZE; ++cpu)
      mine[cpu] = 1;
  }
  control.allreduce(view_of(used.data(), used.size()), view_of(used.data(), used.size()),
                    ReduceOp::max);
  return std::max(1, static_cast<int>(std::count(mine, mine + CPU_SETSIZE, 1.0)));
}

struct BenchStepOptions {
  std::string model = "mlp:784-512-512-10";
  std::size_t batch = 64, steps = 100, warmup = 10;
  std::string input = "1,28,28";
  std::string data;  // when given: input shape and classes of its train split
  int classes = 10;
  std::string optimizer = "sgd";
  float lr = 0.01f;
  std::uint64_t seed = 0;
  std::string tf32 = "default";
  std::string precision = "fp32";
  std::string layout = "auto";
  std::string fuse = "on";
  std::string cuda_graph = "off";
  bool json = false;
  bool layers = false;          // --layers: the per-node profile after the timed passes
  std::size_t layer_steps = 5;  // profiled steps (medians over them)
  double timeout = 300;
  double min_time = 0;  // the steady pass runs at least this long (seconds)
  // > 0 with several ranks: the steady pass as this many rounds of rank 0
  // alone, then every rank at once (see --side-by-side).
  std::size_t side_by_side = 0;
  bool input_given = false, classes_given = false;
};

std::vector<std::size_t> parse_input_shape(const std::string& text) {
  std::vector<std::size_t> dims;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string token = text.substr(start, comma - start);
    std::size_t used = 0;
    unsigned long v = 0;
    try {
      v = std::stoul(token, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    RT_CHECK(used == token.size() && !token.empty() && v > 0,
             "--input '{}': bad dimension '{}' (expected positive numbers separated by commas, "
             "e.g. 1,28,28)",
             text, token);
    dims.push_back(v);
    start = comma + 1;
  }
  RT_CHECK(dims.size() == 1 || dims.size() == 3, "--input '{}': give F or C,H,W", text);
  return dims;
}

struct PhaseTimes {
  double forward = 0, backward = 0, optimizer = 0;
  double total() const { return forward + backward + optimizer; }
};

// --layers: per node of the graph, the median forward and backward time over
// the profiled steps, and the model's own work around the nodes.
struct LayerRow {
  std::string name, kind, kernels;
  std::vector<std::size_t> output;  // per sample
  double forward_ms = 0, backward_ms = 0;
};
struct LayerProfile {
  std::vector<LayerRow> rows;  // one per node, in graph order
  // Before the first node (channels-last transpose, 16-bit casts of weights
  // and input), and the loss's forward and backward.
  double prepare_ms = 0, loss_forward_ms = 0, loss_backward_ms = 0;
  // Forward and backward of a profiled step, end to end (the host waits for
  // the device once, behind backward), median: what the marks cost shows
  // against the phased pass.
  double step_ms = 0;
  std::size_t steps = 0;
  double forward_ms() const {
    double t = prepare_ms + loss_forward_ms;
    for (const LayerRow& r : rows) t += r.forward_ms;
    return t;
  }
  double backward_ms() const {
    double t = loss_backward_ms;
    for (const LayerRow& r : rows) t += r.backward_ms;
    return t;
  }
};

// `steps` more training steps with the model marking every node on an
// IntervalTimer. On a GPU the marks are events recorded on the model's stream
// between its launches, so the step is queued as it always is; the host
// waits once per step, after backward, to read them (and once more after the
// optimizer, which runs outside the marks, so that each step starts on an
// idle device). On the CPU each mark reads a steady clock.
LayerProfile profile_layers(Model& model, Optimizer& optimizer, const float* x,
                            const std::int32_t* y, std::size_t batch, float lr, std::uint64_t rank,
                            std::size_t& step_index, std::size_t steps) {
  const Model::ProfileSlots slots = model.profile_slots();
  IntervalTimer timer(model.device(), model.compute_stream(), slots.count());
  std::vector<std::vector<double>> samples(slots.count());
  std::vector<double> walls;
  struct Unset {
    Model& m;
    ~Unset() { m.set_interval_timer(nullptr); }
  } unset{model};
  model.set_interval_timer(&timer);
  for (std::size_t k = 0; k < steps; ++k) {
    model.set_dropout_context(rank, step_index++);
    Stopwatch sw;
    model.forward_accumulate_fused_loss(x, y, batch, 1.0f);  // as train's step runs it
    model.backward(1.0f, false);
    const std::vector<double> ms = timer.collect("bench step --layers: read the layer timers");
    walls.push_back(1e3 * sw.seconds());
    optimizer.step(model.params(), model.grads(), lr);
    // The next step's clock starts on an idle device.
    device_synchronize(model.device());
    for (std::size_t i = 0; i < ms.size(); ++i) samples[i].push_back(ms[i]);
  }
  LayerProfile p;
  p.steps = steps;
  p.step_ms = median(walls);
  for (std::size_t i = 0; i < model.layer_count(); ++i)
    p.rows.push_back({model.layer_name(i), model.layer_kind(i), model.layer_kernels(i),
                      model.layer_output_shape(i), median(samples[Model::ProfileSlots::forward(i)]),
                      median(samples[Model::ProfileSlots::backward(i)])});
  p.prepare_ms = median(samples[slots.prepare()]);
  p.loss_forward_ms = median(samples[slots.loss_forward()]);
  p.loss_backward_ms = median(samples[slots.loss_backward()]);
  return p;
}

// The per-node table: graph order, then the slowest nodes. `step_ms` is the
// phased step (forward + backward + optimizer) the shares are of.
std::string layer_table(const LayerProfile& p, double step_ms, double phased_fb_ms,
                        double optimizer_ms, bool gpu) {
  std::size_t name_w = 10, kind_w = 8, shape_w = 12;
  auto shape_text = [](const std::vector<std::size_t>& s) {
    return fmt::format("[{}]", fmt::join(s, ","));
  };
  for (const LayerRow& r : p.rows) {
    name_w = std::max(name_w, r.name.size());
    kind_w = std::max(kind_w, r.kind.size());
    shape_w = std::max(shape_w, shape_text(r.output).size());
  }
  std::string out = fmt::format(
      "# layers: median of {} profiled steps; {}; share: of the phased step ({:.3f} ms)\n", p.steps,
      gpu ? "CUDA events on the model's stream around each node"
          : "a steady clock around each node's call",
      step_ms);
  out +=
      fmt::format("# {:>4} {:<{}} {:<{}} {:<{}} {:>10} {:>10} {:>7}  {}\n", "node", "layer", name_w,
                  "kind", kind_w, "output", shape_w, "fwd ms", "bwd ms", "share", "kernels");
  auto share = [&](double ms) { return step_ms > 0 ? 100.0 * ms / step_ms : 0.0; };
  for (std::size_t i = 0; i < p.rows.size(); ++i) {
    const LayerRow& r = p.rows[i];
    out += fmt::format("  {:>4} {:<{}} {:<{}} {:<{}} {:>10.3f} {:>10.3f} {:>6.1f}%{}\n", i, r.name,
                       name_w, r.kind, kind_w, shape_text(r.output), shape_w, r.forward_ms,
                       r.backward_ms, share(r.forward_ms + r.backward_ms),
                       r.kernels.empty() ? "" : "  " + r.kernels);
  }
  auto extra = [&](const char* what, double f, double b) {
    out += fmt::format("  {:>4} {:<{}} {:>10.3f} {:>10.3f} {:>6.1f}%\n", "-", what,
                       name_w + kind_w + shape_w + 2, f, b, share(f + b));
  };
  extra("(input: layout, casts)", p.prepare_ms, 0);
  extra("(loss)", p.loss_forward_ms, p.loss_backward_ms);
  const double rows_ms = p.forward_ms() + p.backward_ms();
  out += fmt::format(
      "# sum of the rows: forward {:.3f} ms, backward {:.3f} ms, {:.3f} ms = {:.1f}% of the "
      "phased forward+backward ({:.3f} ms; the optimizer's {:.3f} ms is in no row); a profiled "
      "step's forward+backward: {:.3f} ms end to end\n",
      p.forward_ms(), p.backward_ms(), rows_ms,
      phased_fb_ms > 0 ? 100.0 * rows_ms / phased_fb_ms : 0.0, phased_fb_ms, optimizer_ms,
      p.step_ms);
  std::vector<std::size_t> order(p.rows.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  auto total = [&](std::size_t i) { return p.rows[i].forward_ms + p.rows[i].backward_ms; };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return total(a) > total(b); });
  order.resize(std::min<std::size_t>(order.size(), 10));
  std::string slowest;
  for (std::size_t i : order)
    slowest += fmt::format("{}{} {:.3f} ms ({:.1f}%)", slowest.empty() ? "" : ", ", p.rows[i].name,
                           total(i), share(total(i)));
  out += fmt::format("# the slowest nodes: {}\n", slowest);
  return out;
}

int run_bench_step(const BenchStepOptions& o, const Topology& topo) {
  // Every wait goes through a communicator with --timeout: a missing rank
  // ends the job naming it instead of hanging it.
  CommOptions comm_options;
  comm_options.timeout_seconds = o.timeout;
  const std::unique_ptr<Communicator> control = make_control_communicator(topo, comm_options);
  const ModelSpec spec = ModelSpec::parse(o.model);
  std::vector<std::size_t> input;
  int classes = o.classes;
  // A language-model preset: windows of its context, token ids below its
  // vocabulary (gpt-nano: the data's, 256 byte tokens by default).
  const auto lm = language_model_shape(spec.preset);
  if (o.data.empty()) {
    input =
        lm && !o.input_given ? std::vector<std::size_t>{lm->context} : parse_input_shape(o.input);
    if (lm && (lm->vocab > 0 || !o.classes_given))
      classes = lm->vocab > 0 ? static_cast<int>(lm->vocab) : 256;
  } else {
    // The shape a training run on this file builds the model for; the samples
    // stay synthetic (reading is 'bench data').
    const Dataset train = Dataset::open_on_all_ranks(o.data, "train", *control);
    input = train.sample_shape();
    classes = train.num_classes();
    if (train.is_tokens()) {
      RT_CHECK(lm.has_value(), "--data {} holds tokens: bench a language-model preset", o.data);
      input = {lm->context};
      if (lm->vocab > 0) classes = static_cast<int>(lm->vocab);
    }
  }
  ModelOptions mo;
  mo.device = topo.device();
  mo.seed = o.seed;
  mo.max_batch = o.batch;
  mo.tf32 = parse_tf32_mode(o.tf32);
  mo.precision = parse_precision(o.precision);
  mo.layout = parse_layout_choice(o.layout);
  mo.fuse = o.fuse == "on";
  auto model = Model::build(spec, input, classes, mo);
  OptimizerConfig oc;
  oc.kind = o.optimizer;
  auto optimizer = make_optimizer(oc, model->param_count(), mo.device);
  optimizer->set_stream(model->compute_stream());  // as the trainer queues it

  // Synthetic inputs in [0, 1) (a language model: token ids) and labels (one
  // per token), a function of the rank and index.
  const std::size_t features =
      std::accumulate(input.begin(), input.end(), std::size_t{1}, std::multiplies<>());
  std::vector<float> x(o.batch * features);
  std::vector<std::int32_t> y(o.batch * model->rows_per_sample());
  const bool tokens = model->rows_per_sample() > 1;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t h = i * 2654435761u + static_cast<std::size_t>(topo.rank()) * 97;
    x[i] = tokens ? static_cast<float>(h % static_cast<std::size_t>(classes))
                  : static_cast<float>(h % 1000) / 1000.0f;
  }
  for (std::size_t i = 0; i < y.size(); ++i)
    y[i] = static_cast<std::int32_t>((i * 7 + static_cast<std::size_t>(topo.rank())) %
                                     static_cast<std::size_t>(classes));
  Tensor xd = Tensor::empty({x.size()}, DType::f32, mo.device);
  Tensor yd = Tensor::empty({y.size()}, DType::i32, mo.device);
  xd.copy_from(Tensor::borrow(x.data(), {x.size()}, DType::f32, Device::cpu()));
  yd.copy_from(Tensor::borrow(y.data(), {y.size()}, DType::i32, Device::cpu()));

  const std::string about = fmt::format(
      "bench step: model {} ({} parameters, spec hash {:016x}), batch {} per rank, input [{}], {} "
      "classes, "
      "device {}{}, precision {}, layout {}, fuse {}, optimizer {}, OPENBLAS_NUM_THREADS={}, {} "
      "steps after "
      "{} "
      "warm-up, {} rank(s)",
      o.model, model->param_count(), spec.hash(), o.batch, fmt::join(input, ","), classes,
      device_name(mo.device),
      mo.device.is_cuda()
          ? fmt::format(" (--tf32 {}: {})", tf32_mode_name(mo.tf32), tf32_mode_summary(mo.tf32))
          : std::string(),
      o.precision, layout_name(model->layout()), o.fuse, o.optimizer,
      std::getenv("OPENBLAS_NUM_THREADS") ? std::getenv("OPENBLAS_NUM_THREADS") : "unset (1)",
      o.steps, o.warmup, topo.world_size());
  // With --json stdout carries the JSON object alone (a file of such lines is
  // a compute curve for 'bench predict'), so the description goes to stderr.
  if (!o.json)
    log0("{}", about);
  else if (topo.rank() == 0)
    std::fprintf(stderr, "%s\n", about.c_str());

  // Refused before the warm-up rather than after it.
  if (o.cuda_graph == "on") {
    RT_CHECK(!model->draws_dropout_masks(),
             "--cuda-graph on: model {} draws dropout masks, whose keys change with every step "
             "(a graph would repeat one step's masks); bench it with its dropout at 0 (e.g. "
             "gpt2:dropout=0)",
             o.model);
    const std::string added = model->layer_type_unsafe_in_cuda_graph();
    RT_CHECK(added.empty(),
             "--cuda-graph on: layer type {} does not declare that a CUDA graph may repeat its "
             "steps (LayerType::cuda_graph); use --cuda-graph off",
             added);
    RT_CHECK(mo.device.is_cuda(), "--cuda-graph on: a CUDA graph needs a GPU (--device cuda)");
  }
  PhaseTimes sum;
  double loss = 0;
  control->barrier();
  for (std::size_t step = 0; step < o.warmup + o.steps; ++step) {
    model->set_dropout_context(static_cast<std::uint64_t>(topo.rank()), step);
    Stopwatch sw;
    const auto r = model->forward(xd.data_as<float>(), yd.data_as<std::int32_t>(), o.batch, true);
    model->synchronize();
    const double t_forward = sw.seconds();
    sw.reset();
    model->backward(1.0f, false);
    model->synchronize();
    const double t_backward = sw.seconds();
    sw.reset();
    optimizer->step(model->params(), model->grads(), o.lr);
    device_synchronize(mo.device);
    const double t_optimizer = sw.seconds();
    if (step >= o.warmup) {
      sum.forward += t_forward;
      sum.backward += t_backward;
      sum.optimizer += t_optimizer;
    }
    loss = r.loss_sum / static_cast<double>(y.size());
  }
  const double n = static_cast<double>(o.steps);
  // Ranks that computed at once on one machine (the most on any): they share
  // its cores, caches and memory bandwidth ('bench predict --compute-curve').
  double ranks_per_host = topo.local_size();
  control->allreduce(view_of(&ranks_per_host, 1), view_of(&ranks_per_host, 1), ReduceOp::max);
  // More ranks than cores on a host: a rank that waits for the others in a
  // synchronous step gives its core to them, so such a step goes at the ranks'
  // mean rate, not the slowest one's (which an unsynchronised pass starves).
  const int cores = host_cores(topo, *control);
  double oversubscribed = topo.local_size() > cores ? 1.0 : 0.0;
  control->allreduce(view_of(&oversubscribed, 1), view_of(&oversubscribed, 1), ReduceOp::max);

  // The steady rate, as a training step runs: the same steps queued back to
  // back with the loss kept on the device, one host wait at the end of the
  // window (the phase pass above synchronises after every phase, which a real
  // step never does, so its sum overstates the step). At least `min_steps`,
  // and at least `min_seconds`: ranks timed at once then share the machine
  // for the whole window (a fixed count would leave the slowest rank alone at
  // the end).
  std::size_t step_index = o.warmup + o.steps;
  // --cuda-graph on: the steady pass replays one captured forward + backward
  // (the optimizer stays outside: its AdamW bias correction changes with the
  // step). Captured after the warm-up, when every plan, engine and workspace
  // of this batch exists, so the captured work allocates and waits for nothing.
  detail::StreamGraph graph;
  if (o.cuda_graph == "on") {
    // The phase pass ran forward(); the captured step is the fused-loss one:
    // once eagerly first, so that whatever it makes on first use exists
    // before the capture, which must allocate nothing.
    model->set_dropout_context(static_cast<std::uint64_t>(topo.rank()), step_index);
    model->forward_accumulate_fused_loss(xd.data_as<float>(), yd.data_as<std::int32_t>(), o.batch,
                                         1.0f);
    model->backward(1.0f, false);
    // Its loss is no steady step's: the reported loss divides by those alone.
    model->take_loss_totals();
    graph.capture(
        model->compute_stream(),
        [&] {
          model->forward_accumulate_fused_loss(xd.data_as<float>(), yd.data_as<std::int32_t>(),
                                               o.batch, 1.0f);
          model->backward(1.0f, false);
        },
        fmt::format("model {}'s forward and backward at batch {}", o.model, o.batch));
  }
  // The device waits this bench makes to read its clock: not the step's own
  // host syncs, which are what host_syncs_per_step reports.
  std::uint64_t clock_waits = 0;
  auto wait_for_clock = [&] {
    const std::uint64_t before = host_sync::count();
    device_synchronize(mo.device);
    clock_waits += host_sync::count() - before;
  };
  auto timed_window = [&](std::size_t min_steps, double min_seconds) {
    Stopwatch window;
    std::size_t done = 0;
    for (std::size_t step = 0;
         step < min_steps || (min_seconds > 0 && window.seconds() < min_seconds); ++step) {
      model->set_dropout_context(static_cast<std::uint64_t>(topo.rank()), step_index++);
      if (graph.captured()) {
        graph.replay(model->compute_stream());
      } else {
        model->forward_accumulate_fused_loss(xd.data_as<float>(), yd.data_as<std::int32_t>(),
                                             o.batch, 1.0f);
        model->backward(1.0f, false);
      }
      optimizer->step(model->params(), model->grads(), o.lr);
      ++done;
      // On a GPU the clock would only see the queueing: wait for the device
      // (a counted host sync) once the count is done and the time decides.
      if (min_seconds > 0 && step + 1 >= min_steps && mo.device.is_cuda()) wait_for_clock();
    }
    if (min_seconds <= 0 && mo.device.is_cuda()) wait_for_clock();
    return std::pair<std::size_t, double>{done, window.seconds()};
  };
  // A synchronous step of ranks that ran at once at `rate` samples/s each:
  // the slowest rank's rate, or with more ranks than cores their mean rate.
  auto synchronous_ms = [&](double rate) {
    double lo = rate, total = rate;
    control->allreduce(view_of(&lo, 1), view_of(&lo, 1), ReduceOp::min);
    control->allreduce(view_of(&total, 1), view_of(&total, 1), ReduceOp::sum);
    const double r = oversubscribed > 0 ? total / topo.world_size() : lo;
    return 1e3 * static_cast<double>(o.batch) / r;
  };
  control->barrier();
  const std::uint64_t syncs_before = host_sync::count();
  std::size_t steady_steps = 0;
  double steady_s = 0;
  // --side-by-side: rounds of rank 0 alone (the others wait without using a
  // core) and then every rank at once, each half as long as the steady pass
  // asks. The machine's speed drifts over seconds on a shared host, so a
  // slowdown taken from two separate runs is mostly drift; within a round both
  // halves see the same machine.
  std::vector<double> alone_ms, beside_ms, slowdowns;
  std::size_t alone_steps = 0;  // rank 0's, outside the steady figures
  const bool side_by_side = o.side_by_side > 0 && topo.world_size() > 1;
  const double half_s =
      side_by_side ? o.min_time / static_cast<double>(o.side_by_side) : o.min_time;
  // What a profiler started with --profile-from-start off records (the steady
  // steps only: launch/gpu-checks.sh's kernel table).
  std::optional<ProfiledRegion> profiled;
  profiled.emplace(mo.device.is_cuda());
  for (std::size_t round = 0; round < (side_by_side ? o.side_by_side : 1); ++round) {
    if (side_by_side) {
      control->barrier();
      double alone = 0;
      if (topo.rank() == 0) {
        const auto [n_alone, s_alone] = timed_window(o.steps, half_s);
        alone = 1e3 * s_alone / static_cast<double>(n_alone);
        alone_steps += n_alone;
      } else {
        // Asleep for the half, not polling in the wait below: a rank that
        // shares rank 0's core would otherwise take some of it.
        std::this_thread::sleep_for(std::chrono::duration<double>(half_s));
      }
      control->allreduce(view_of(&alone, 1), view_of(&alone, 1), ReduceOp::max);
      alone_ms.push_back(alone);
      control->barrier();
    }
    const auto [n_steps, seconds] = timed_window(o.steps, half_s);
    steady_steps += n_steps;
    steady_s += seconds;
    if (side_by_side) {
      beside_ms.push_back(
          synchronous_ms(static_cast<double>(o.batch) * static_cast<double>(n_steps) / seconds));
      slowdowns.push_back(beside_ms.back() / alone_ms.back());
    }
  }
  profiled.reset();

  const double steady_n = static_cast<double>(steady_steps);
  const std::uint64_t steady_syncs = host_sync::count() - syncs_before - clock_waits;
  // The loss totals count rank 0's steps alone too.
  loss = model->take_loss_totals().loss_sum /
         (static_cast<double>(y.size()) * (steady_n + static_cast<double>(alone_steps)));
  const double rate = static_cast<double>(o.batch) * steady_n / steady_s;
  const double syncs_per_step = static_cast<double>(steady_syncs) / steady_n;
  double min_rate = rate, max_rate = rate, total_rate = rate;
  control->allreduce(view_of(&min_rate, 1), view_of(&min_rate, 1), ReduceOp::min);
  control->allreduce(view_of(&max_rate, 1), view_of(&max_rate, 1), ReduceOp::max);
  control->allreduce(view_of(&total_rate, 1), view_of(&total_rate, 1), ReduceOp::sum);
  const double mean_rate = total_rate / topo.world_size();
  const double synchronous_rate = oversubscribed > 0 ? mean_rate : min_rate;
  // After every figure above, so that its marks and host waits change none
  // of them. Every rank profiles (the machine is loaded as in the timed
  // passes); rank 0 reports its own.
  LayerProfile profile;
  if (o.layers) {
    control->barrier();
    profile =
        profile_layers(*model, *optimizer, xd.data_as<float>(), yd.data_as<std::int32_t>(), o.batch,
                       o.lr, static_cast<std::uint64_t>(topo.rank()), step_index, o.layer_steps);
  }
  if (topo.rank() != 0) return 0;
  const double phased_step_ms = 1e3 * sum.total() / n;
  // ringtrain's own device memory at its most (tensors, workspaces, scratch:
  // device_memory.h), the counterpart of PyTorch's max_memory_allocated.
  const DeviceMemoryUse memory = device_memory_use();

  std::string out;
  if (o.json) {
    nlohmann::json j = {
        {"model", o.model},
        {"params", model->param_count()},
        {"batch", o.batch},
        {"device", device_name(mo.device)},
        {"tf32", mo.device.is_cuda() ? tf32_mode_name(mo.tf32) : "n/a"},
        {"precision", o.precision},
        {"layout", layout_name(model->layout())},
        {"fuse", o.fuse},
        {"cuda_graph", graph.captured()},
        {"cuda_graph_nodes", graph.nodes()},
        {"steps", o.steps},
        {"forward_ms", 1e3 * sum.forward / n},
        {"backward_ms", 1e3 * sum.backward / n},
        {"optimizer_ms", 1e3 * sum.optimizer / n},
        {"step_ms", 1e3 * steady_s / steady_n},
        {"steady_steps", steady_steps},
        {"phased_step_ms", phased_step_ms},
        {"host_syncs_per_step", syncs_per_step},
        {"samples_per_s", rate},
        {"samples_per_s_min_rank", min_rate},
        {"samples_per_s_mean_rank", mean_rate},
        {"step_ms_slowest_rank", 1e3 * static_cast<double>(o.batch) / min_rate},
        {"step_ms_synchronous", 1e3 * static_cast<double>(o.batch) / synchronous_rate},
        {"cores_per_host", cores},
        {"oversubscribed", oversubscribed > 0},
        {"ranks", topo.world_size()},
        {"ranks_per_host", static_cast<int>(ranks_per_host)},
        {"final_loss", loss}};
    j["device_memory_peak_bytes"] =
        mo.device.is_cuda() ? nlohmann::json(memory.peak) : nlohmann::json(nullptr);
    // What the peak is made of: the largest allocations live then (the
    // model's arena, the convolutions' workspace, widening buffers, the
    // input batch), largest first.
    j["device_memory_peak_largest_bytes"] =
        mo.device.is_cuda() ? nlohmann::json(memory.largest_at_peak) : nlohmann::json(nullptr);
    // What the model's plan holds, by kind (the batch's activations and
    // their gradients, the layers' shared workspace, the weights with their
    // compute copy under bf16/fp16, the gradients, the optimizer's state), so
    // that a
    // peak above its sum points at what the libraries allocate (cuDNN's and
    // cuBLASLt's workspaces, buffers grown on a first step).
    {
      const std::size_t weights = model->param_count() * sizeof(float);
      const std::size_t planned[] = {model->activation_bytes_per_sample() * o.batch,
                                     model->workspace_bytes_per_sample() * o.batch,
                                     weights * (mo.precision == DType::f32 ? 1 : 2), weights,
                                     state_values_per_parameter(oc) * weights};
      j["planned_bytes"] = {
          {"activations", planned[0]},
          {"workspace", planned[1]},
          {"weights", planned[2]},
          {"gradients", planned[3]},
          {"optimizer_state", planned[4]},
          {"total", planned[0] + planned[1] + planned[2] + planned[3] + planned[4]}};
    }
    // Which attention ran (cuDNN's SDPA, or a fallback and why), so that a
    // speed row never times a fallback as SDPA unawares; null: no attention.
    j["attention"] = nullptr;
    for (std::size_t i = 0; i < model->layer_count(); ++i)
      if (model->layer_kind(i) == "causal_self_attention") {
        j["attention"] = model->layer_kernels(i);
        break;
      }
    if (side_by_side) {
      // The slowdown beside the others, paired round by round: what 'bench
      // predict --compute-curve' applies to the curve alone.
      j["side_by_side_rounds"] = o.side_by_side;
      j["step_ms_alone"] = median(alone_ms);
      j["step_ms_beside"] = median(beside_ms);
      j["slowdown_beside"] = median(slowdowns);
      j["rounds_alone_ms"] = alone_ms;
      j["rounds_beside_ms"] = beside_ms;
    }
    if (o.layers) {
      // One entry per node of the graph, in graph order; share is of the
      // phased step (phased_step_ms).
      nlohmann::json rows = nlohmann::json::array();
      for (std::size_t i = 0; i < profile.rows.size(); ++i) {
        const LayerRow& r = profile.rows[i];
        rows.push_back(
            {{"index", i},
             {"name", r.name},
             {"kind", r.kind},
             {"output", r.output},
             {"forward_ms", r.forward_ms},
             {"backward_ms", r.backward_ms},
             {"share", phased_step_ms > 0 ? (r.forward_ms + r.backward_ms) / phased_step_ms : 0.0},
             {"kernels", r.kernels}});
      }
      j["layers"] = std::move(rows);
      j["layers_profile"] = {{"steps", profile.steps},
                             {"clock", mo.device.is_cuda() ? "cuda events" : "steady clock"},
                             {"prepare_ms", profile.prepare_ms},
                             {"loss_forward_ms", profile.loss_forward_ms},
                             {"loss_backward_ms", profile.loss_backward_ms},
                             {"forward_ms", profile.forward_ms()},
                             {"backward_ms", profile.backward_ms()},
                             {"step_ms", profile.step_ms}};
    }
    out = j.dump() + "\n";
  } else {
    out += fmt::format("# {:<10} {:>10} {:>8}\n", "phase", "ms/step", "share");
    auto row = [&](const char* name, double seconds) {
      out += fmt::format("  {:<10} {:>10.3f} {:>7.1f}%\n", name, 1e3 * seconds / n,
                         100.0 * seconds / sum.total());
    };
    row("forward", sum.forward);
    row("backward", sum.backward);
    row("optimizer", sum.optimizer);
    row("total", sum.total());
    out += fmt::format("# steady step (no per-phase waits): {:.3f} ms, {} host syncs per step{}\n",
                       1e3 * steady_s / steady_n, syncs_per_step,
                       graph.captured() ? fmt::format(" (forward + backward replayed as one CUDA "
                                                      "graph of {} nodes, the optimizer outside)",
                                                      graph.nodes())
                                        : std::string());
    if (mo.device.is_cuda()) {
      std::vector<std::string> largest;
      for (const std::size_t b : memory.largest_at_peak)
        largest.push_back(fmt::format("{:.1f}", static_cast<double>(b) / (1 << 20)));
      out += fmt::format(
          "# device memory at its most: {:.1f} MiB (ringtrain's own allocations: tensors, "
          "workspaces, scratch; not cuDNN's, cuBLAS's or NCCL's internal ones); its largest "
          "allocations then: {} MiB\n",
          static_cast<double>(memory.peak) / (1 << 20), fmt::join(largest, ", "));
    }
    out += fmt::format(
        "# samples/s per rank: {:.0f} (rank 0), min {:.0f}, max {:.0f}; all ranks {:.0f}; mean "
        "loss {:.4f}\n",
        rate, min_rate, max_rate, total_rate, loss);
    out +=
        fmt::format("# a synchronous step of these ranks: {:.3f} ms ({})\n",
                    1e3 * static_cast<double>(o.batch) / synchronous_rate,
                    oversubscribed > 0 ? "more ranks than cores on a host: at the ranks' mean rate"
                                       : "a core per rank: at the slowest rank's rate");
    if (side_by_side)
      out += fmt::format(
          "# side by side, {} rounds of rank 0 alone then every rank at once: {:.3f} ms alone, "
          "{:.3f} ms at once (medians); slowdown beside the others x{:.3f} (median of the rounds' "
          "ratios)\n",
          o.side_by_side, median(alone_ms), median(beside_ms), median(slowdowns));
    if (o.layers)
      out += layer_table(profile, phased_step_ms, 1e3 * (sum.forward + sum.backward) / n,
                         1e3 * sum.optimizer / n, mo.device.is_cuda());
  }
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

CLI::App* add_bench_step(CLI::App& parent, CommandContext& ctx) {
  auto o = std::make_shared<BenchStepOptions>();
  CLI::App* sub = parent.add_subcommand(
      "step",
      "Time one training step (forward+loss, backward, optimizer) of a model on synthetic data");
  sub->add_option("--model", o->model, std::string("Model: ") + std::string(model_spec_help()))
      ->capture_default_str();
  sub->add_option("--batch", o->batch, "Batch size per rank")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--steps", o->steps, "Timed steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed steps first (caches, allocator, cuDNN)")
      ->capture_default_str();
  sub->add_option("--min-time", o->min_time,
                  "Run the steady pass (samples/s, step_ms) for at least this many seconds, past "
                  "--steps if need be: ranks timed at once share the machine for the whole window")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--side-by-side", o->side_by_side,
                  "With several ranks: time the steady pass as this many rounds of rank 0 alone "
                  "(the others wait without using a core), then every rank at once, each half "
                  "--min-time / ROUNDS long (and at least --steps); reports the slowdown beside "
                  "the others as the median of the rounds' ratios, which a shared machine's "
                  "drift does not bend as it does two separate runs")
      ->capture_default_str();
  auto* input = sub->add_option("--input", o->input, "Per-sample input shape: C,H,W or F")
                    ->capture_default_str();
  auto* classes =
      sub->add_option("--classes", o->classes, "Number of classes (the model's last layer)")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
  sub->add_option("--data", o->data,
                  "Take the input shape and classes from this data set's train split (the "
                  "samples stay synthetic)")
      ->check(CLI::ExistingFile)
      ->excludes(input)
      ->excludes(classes);
  sub->add_option("--optimizer", o->optimizer,
                  "Optimizer timed in the update phase (default settings)")
      ->check(CLI::IsMember({"sgd", "adamw"}))
      ->capture_default_str();
  sub->add_option("--lr", o->lr, "Learning rate of the update")->capture_default_str();
  sub->add_option("--seed", o->seed, "Parameter initialisation seed")->capture_default_str();
  auto* layers = sub->add_flag(
      "--layers", o->layers,
      "After the timed passes, profile --layer-steps more steps node by node and print "
      "a table: per node of the graph (name, kind, output shape per sample) the median "
      "forward and backward ms and the share of the phased step, with the model's own "
      "work (input layout and 16-bit casts, loss) in rows of their own and the 10 "
      "slowest nodes; a convolution's row names its kernels (on a GPU the cuDNN "
      "algorithms chosen for forward, backward filter and backward data, the 16-bit "
      "ones under --precision bf16|fp16, math type and workspace; on the CPU its "
      "path). GPU: CUDA events on the model's stream around each node, read once per "
      "step after backward (no host wait inside the step); CPU: a steady clock around "
      "each node's call. With --json: a \"layers\" array (one entry per node) and a "
      "\"layers_profile\" object");
  sub->add_option("--layer-steps", o->layer_steps, "Steps profiled by --layers (medians over them)")
      ->check(CLI::PositiveNumber)
      ->needs(layers)
      ->capture_default_str();
  sub->add_flag("--json", o->json,
                "Print one JSON object (rank 0) on stdout instead of the table (the description "
                "line goes to stderr)");
  sub->add_option("--timeout", o->timeout,
                  "Seconds the ranks wait for each other before the job aborts, naming the late "
                  "ranks")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_device_options(sub, ctx, "auto");
  add_tf32_option(sub, o->tf32);
  add_precision_option(sub, o->precision);
  add_layout_option(sub, o->layout);
  add_fuse_option(sub, o->fuse);
  sub->add_option("--cuda-graph", o->cuda_graph,
                  "on: the steady pass replays the forward and backward as one CUDA graph, "
                  "captured once after the warm-up (one launch per step instead of one per "
                  "kernel; the optimizer runs outside it; GPU only, and only for a model "
                  "without dropout, whose masks change every step). Off by default until it "
                  "measures faster")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  sub->parse_complete_callback([&ctx, o, input, classes] {
    o->input_given = input->count() > 0;
    o->classes_given = classes->count() > 0;
    // Fail before MPI starts on a spec that does not parse.
    (void)ModelSpec::parse(o->model);
    (void)parse_input_shape(o->input);
    ctx.action = [o](const Topology& t) { return run_bench_step(*o, t); };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("bench", "step", 30, ringtrain::apps::add_bench_step)
