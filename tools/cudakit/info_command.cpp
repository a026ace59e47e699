// `cudakit info [--json] [--device N] [--memory]`: the driver and each GPU's key
// properties, as text or as one JSON document. --memory adds each device's default memory
// pool as this process sees it: its release threshold, the bytes it reserves and hands
// out (now and at their peaks) and cudakit's count of allocations from it. Pools are per
// process, so a fresh `cudakit info` shows the pool's settings and an idle pool; a
// program reads the same figures of its own pool with MemoryPoolRef::usage().
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "command.hpp"
#include "cudakit/cudakit.hpp"

namespace cudakit::tool {
namespace {

struct InfoOptions {
  bool json = false;
  int device = -1;  // every device
  bool memory = false;
};

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

nlohmann::ordered_json placement_json(const DevicePlacement& p) {
  return {{"pci_domain", p.pci_domain},
          {"pci_bus", p.pci_bus},
          {"pci_device", p.pci_device},
          {"host_numa_node", p.host_numa_node},
          {"memory_numa_node", p.memory_numa_node}};
}

// Every ordered pair of GPUs: what the driver says of the link (and NVML of its kind).
nlohmann::ordered_json links_json(const Topology& t) {
  nlohmann::ordered_json links = nlohmann::ordered_json::array();
  for (const PeerLink& l : t.links)
    links.push_back({{"from", l.from},
                     {"to", l.to},
                     {"peer_access", l.access},
                     {"performance_rank", l.performance_rank},
                     {"native_atomics", l.native_atomics},
                     {"cuda_array_access", l.array_access},
                     {"link", to_string(l.link)}});
  return links;
}

// NCCL, when it can be loaded (info loads it: nothing else in the command needs it).
nlohmann::ordered_json nccl_json() {
  try {
    return {{"available", true}, {"version", nccl::version_string()}, {"library", nccl::library_path()}};
  } catch (const nccl::NcclUnavailable& e) {
    std::string why = e.what();
    return {{"available", false}, {"why", why.substr(0, why.find(';'))}};
  }
}

std::string nccl_words() {
  auto j = nccl_json();
  if (j["available"].get<bool>())
    return j["version"].get<std::string>() + " (" + j["library"].get<std::string>() + ")";
  return "not found (" + j["why"].get<std::string>() + "); CUDAKIT_LIBNCCL names it";
}

void print_topology(const Topology& t) {
  if (t.links.empty()) {
    std::printf("\ntopology: one GPU, no peers\n");
    return;
  }
  std::printf("\ntopology (from -> to: peer access, performance rank (0 best), native atomics, link):\n");
  for (const PeerLink& l : t.links)
    std::printf("    %d -> %d  access %-3s  rank %d  atomics %-3s  %s\n", l.from, l.to, l.access ? "yes" : "no",
                l.performance_rank, l.native_atomics ? "yes" : "no", to_string(l.link));
}

// The device's default memory pool, as this process sees it (see above).
nlohmann::ordered_json memory_pool_json(const Device& d) {
  if (!d.supports_memory_pools()) return {{"supported", false}};
  MemoryPoolRef pool = MemoryPoolRef::device_default(d);
  PoolUsage u = pool.usage();
  return {{"supported", true},
          {"release_threshold_bytes", pool.release_threshold()},
          {"reserved_bytes", u.reserved_bytes},
          {"reserved_high_bytes", u.reserved_high_bytes},
          {"used_bytes", u.used_bytes},
          {"used_high_bytes", u.used_high_bytes},
          {"live_allocations", u.live_allocations},
          {"allocations_made", u.allocations_made}};
}

void print_memory_pool(const Device& d) {
  nlohmann::ordered_json j = memory_pool_json(d);
  if (!j["supported"].get<bool>()) {
    std::printf("    memory pool         not supported by this device or driver\n");
    return;
  }
  auto bytes = [&](const char* key) { return j[key].get<std::uint64_t>(); };
  std::uint64_t threshold = bytes("release_threshold_bytes");
  std::printf("    memory pool         release threshold %s\n",
              threshold == keep_all_pool_memory ? "keep all" : (std::to_string(threshold) + " B").c_str());
  std::printf("                        reserved %llu B (peak %llu B), in use %llu B (peak %llu B)\n",
              static_cast<unsigned long long>(bytes("reserved_bytes")),
              static_cast<unsigned long long>(bytes("reserved_high_bytes")),
              static_cast<unsigned long long>(bytes("used_bytes")), static_cast<unsigned long long>(bytes("used_high_bytes")));
  std::printf("                        allocations by cudakit: %llu live, %llu made in this process\n",
              static_cast<unsigned long long>(bytes("live_allocations")),
              static_cast<unsigned long long>(bytes("allocations_made")));
}

nlohmann::ordered_json device_json(const Device& d) {
  auto mem = d.memory_info();
  auto cc = d.compute_capability();
  return {{"ordinal", d.ordinal()},
          {"name", d.name()},
          {"uuid", d.uuid_string()},
          {"pci_bus_id", d.pci_bus_id()},
          {"compute_capability", std::to_string(cc.major) + "." + std::to_string(cc.minor)},
          {"arch", cc.arch()},
          {"multiprocessors", d.multiprocessor_count()},
          {"total_memory_bytes", mem.total_bytes},
          {"free_memory_bytes", mem.free_bytes},
          {"l2_cache_bytes", d.l2_cache_bytes()},
          {"max_threads_per_block", d.max_threads_per_block()},
          {"max_shared_memory_per_block_optin", d.max_shared_memory_per_block_optin()},
          {"clock_khz", d.attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE)},
          {"memory_clock_khz", d.attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)},
          {"memory_bus_width_bits", d.attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)},
          {"memory_pools", d.supports_memory_pools()},
          {"cluster_launch", d.supports_clusters()},
          {"cooperative_launch", d.supports_cooperative_launch()},
          {"placement", placement_json(placement(d))}};
}

void print_device(const Device& d) {
  auto mem = d.memory_info();
  auto cc = d.compute_capability();
  std::printf("\n[%d] %s\n", d.ordinal(), d.name().c_str());
  std::printf("    compute capability  %d.%d (%s)\n", cc.major, cc.minor, cc.arch().c_str());
  std::printf("    multiprocessors     %d\n", d.multiprocessor_count());
  std::printf("    memory              %s total, %s free\n", mib(mem.total_bytes).c_str(), mib(mem.free_bytes).c_str());
  std::printf("    L2 cache            %d KiB\n", d.l2_cache_bytes() / 1024);
  std::printf("    shared memory       %d KiB per block (%d KiB opt-in)\n", d.max_shared_memory_per_block() / 1024,
              d.max_shared_memory_per_block_optin() / 1024);
  std::printf("    clocks              SM %d MHz, memory %d MHz, bus %d bits\n",
              d.attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1000, d.attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) / 1000,
              d.attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH));
  std::printf("    features            memory pools %s, clusters %s, cooperative launch %s\n",
              d.supports_memory_pools() ? "yes" : "no", d.supports_clusters() ? "yes" : "no",
              d.supports_cooperative_launch() ? "yes" : "no");
  std::printf("    uuid                %s\n", d.uuid_string().c_str());
  std::printf("    pci bus id          %s\n", d.pci_bus_id().c_str());
  DevicePlacement p = placement(d);
  std::printf("    numa                host node %s%s\n", p.host_numa_node >= 0 ? std::to_string(p.host_numa_node).c_str() : "none",
              p.memory_numa_node >= 0 ? (", memory is node " + std::to_string(p.memory_numa_node)).c_str() : "");
}

int run_info(const InfoOptions& o) {
  std::vector<Device> devices;
  if (o.device >= 0) devices.push_back(device_from_option(o.device));
  else devices = (driver::ensure_loaded(), Device::all());
  if (o.json) {
    nlohmann::ordered_json doc = {{"cudakit_version", std::string(cudakit::version())},
                          {"driver_version", driver::version_string(driver::version())},
                          {"driver_library", driver::library_path()},
                          {"device_count", Device::count()},
                          {"devices", nlohmann::ordered_json::array()}};
    for (const Device& d : devices) {
      doc["devices"].push_back(device_json(d));
      if (o.memory) doc["devices"].back()["memory_pool"] = memory_pool_json(d);
    }
    doc["topology"] = {{"links", links_json(topology())}};
    doc["nccl"] = nccl_json();
    std::printf("%s\n", doc.dump(2).c_str());
    return exit_ok;
  }
  std::printf("cudakit %s\n", std::string(cudakit::version()).c_str());
  std::printf("driver: CUDA %s (%s)\n", driver::version_string(driver::version()).c_str(),
              driver::library_path().c_str());
  std::printf("devices: %d\n", Device::count());
  for (const Device& d : devices) {
    print_device(d);
    if (o.memory) print_memory_pool(d);
  }
  print_topology(topology());
  std::printf("\nnccl: %s\n", nccl_words().c_str());
  return exit_ok;
}

CommandRun setup_info(CLI::App& app, Invocation& invocation) {
  auto o = std::make_shared<InfoOptions>();
  app.add_flag("--json", o->json, "print one JSON document instead of text");
  app.add_option("--device", o->device, "describe only device N")->check(integer_at_least(0));
  app.add_flag("--memory", o->memory, "add each device's default memory pool: threshold, bytes, allocations");
  app.footer(help_footer("Describes the driver, every GPU (or device N), how they connect, and whether NCCL can be opened.",
                         {{exit_ok, ""}, {exit_no_gpu, ""}, {exit_usage, ""}, {exit_internal, ""}},
                         {Environment::libcuda, Environment::libnccl}));
  app.parse_complete_callback([o, &invocation] { invocation.json = o->json; });
  return [o] { return run_info(*o); };
}

CUDAKIT_SUBCOMMAND("info", "the driver and every GPU's key properties", 10, setup_info);

}  // namespace
}  // namespace cudakit::tool
