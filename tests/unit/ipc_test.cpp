// Sharing memory and events between processes, on the fake driver: the descriptor's
// parser (pure host code), the socket channel (credentials, framing, file descriptors),
// pools, pool allocations and events exported in one process and imported in another
// (fork), and every hostile input an importer meets: forged and stale descriptors, a
// peer of another user, a socket closed halfway. Each is a clear IpcError, nothing
// crashes, and no file descriptor leaks (counted in /proc/self/fd).
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "cudakit/cudakit.hpp"
#include "cudakit/ipc_channel.hpp"
#include "cudakit/ipc_descriptor.hpp"
#include "cudakit/shareable_memory.hpp"
#include "cudakit/shareable_pool.hpp"
#include "cudakit/shared_event.hpp"
#include "fake_fixture.hpp"

namespace cudakit {
namespace {

using testing::FakeDriverTest;

int open_file_descriptors() {
  int count = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++count;
    ::closedir(d);
  }
  return count;
}

// Fails the test when the scope ends with more file descriptors open than it began with.
struct NoLeakedFiles {
  int before = open_file_descriptors();
  ~NoLeakedFiles() { EXPECT_EQ(open_file_descriptors(), before) << "file descriptors leaked"; }
};

template <class F>
IpcFailure failure_of(F&& fn) {
  try {
    fn();
  } catch (const IpcError& e) {
    return e.reason();
  }
  ADD_FAILURE() << "no IpcError thrown";
  return IpcFailure::system;
}

template <class F>
std::string ipc_message_of(F&& fn) {
  try {
    fn();
  } catch (const IpcError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no IpcError thrown";
  return {};
}

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> value(-1000.0f, 1000.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = value(generator);
  return v;
}

IpcDescriptor sample_descriptor(IpcKind kind) {
  IpcDescriptor d;
  d.kind = kind;
  for (std::size_t i = 0; i < d.device_uuid.size(); ++i) d.device_uuid[i] = static_cast<std::uint8_t>(0x40 + i);
  if (d.states_size()) d.bytes = d.allocation_bytes = 4096;
  if (kind == IpcKind::pool_allocation || kind == IpcKind::event) {
    d.payload_bytes = 64;
    for (std::size_t i = 0; i < 64; ++i) d.payload[i] = static_cast<std::uint8_t>(i * 7 + 1);
  }
  if (kind == IpcKind::pool_allocation) {
    d.ledger_slot = 3;
    d.ledger_generation = 5;
  }
  return d;
}

using Bytes = std::array<std::byte, IpcDescriptor::encoded_bytes>;

std::string parse_error(const Bytes& b, std::size_t size = IpcDescriptor::encoded_bytes) {
  return ipc_message_of([&] { parse_ipc_descriptor(std::span<const std::byte>(b.data(), size)); });
}

// ---- the descriptor's parser (no driver) ----

TEST(IpcDescriptorTest, EveryKindRoundTrips) {
  for (IpcKind kind : {IpcKind::memory_pool, IpcKind::pool_allocation, IpcKind::virtual_memory, IpcKind::event,
                       IpcKind::allocation_ledger}) {
    IpcDescriptor d = sample_descriptor(kind);
    if (kind == IpcKind::virtual_memory) d.allocation_bytes = 8192;
    IpcDescriptor back = parse_ipc_descriptor(encode_ipc_descriptor(d));
    EXPECT_EQ(back.kind, d.kind);
    EXPECT_EQ(back.bytes, d.bytes);
    EXPECT_EQ(back.allocation_bytes, d.allocation_bytes);
    EXPECT_EQ(back.device_uuid, d.device_uuid);
    EXPECT_EQ(back.payload_bytes, d.payload_bytes);
    EXPECT_EQ(back.payload, d.payload);
    EXPECT_EQ(back.ledger_slot, d.ledger_slot);
    EXPECT_EQ(back.ledger_generation, d.ledger_generation);
  }
}

TEST(IpcDescriptorTest, RefusesEachBrokenRuleByName) {
  auto valid = [] { return encode_ipc_descriptor(sample_descriptor(IpcKind::pool_allocation)); };
  auto set = [](Bytes& b, std::size_t at, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
  };
  Bytes b = valid();
  EXPECT_NE(parse_error(b, 119).find("119 bytes"), std::string::npos);
  b = valid();
  b[0] = std::byte{'C'};
  EXPECT_NE(parse_error(b).find("magic"), std::string::npos);
  b = valid();
  set(b, 8, 2, 2);
  EXPECT_NE(parse_error(b).find("version 2"), std::string::npos);
  b = valid();
  set(b, 10, 9, 2);
  EXPECT_NE(parse_error(b).find("unknown kind 9"), std::string::npos);
  b = valid();
  set(b, 52, 0, 4);
  EXPECT_NE(parse_error(b).find("without its ledger generation"), std::string::npos);
  b = encode_ipc_descriptor(sample_descriptor(IpcKind::memory_pool));
  set(b, 12, 1, 4);
  EXPECT_NE(parse_error(b).find("memory pool with a ledger entry"), std::string::npos);
  b = valid();
  set(b, 16, 0, 8);
  EXPECT_NE(parse_error(b).find("0 bytes"), std::string::npos);
  b = valid();
  set(b, 16, std::uint64_t(1) << 60, 8);
  set(b, 24, std::uint64_t(1) << 60, 8);
  EXPECT_NE(parse_error(b).find("2^48"), std::string::npos);
  b = valid();
  set(b, 24, 100, 8);
  EXPECT_NE(parse_error(b).find("smaller"), std::string::npos);
  b = valid();
  set(b, 24, 8192, 8);
  EXPECT_NE(parse_error(b).find("differs"), std::string::npos);
  b = valid();
  set(b, 48, 65, 4);
  EXPECT_NE(parse_error(b).find("payload of 65"), std::string::npos);
  b = encode_ipc_descriptor(sample_descriptor(IpcKind::memory_pool));
  b[100] = std::byte{1};
  EXPECT_NE(parse_error(b).find("past the payload"), std::string::npos);
  b = encode_ipc_descriptor(sample_descriptor(IpcKind::event));
  set(b, 16, 4096, 8);
  EXPECT_NE(parse_error(b).find("states a size"), std::string::npos);
}

TEST(IpcDescriptorTest, RandomAndMutatedBytesAreRefusedOrParsedNeverACrash) {
  std::mt19937 generator(20261204);
  const Bytes seed = encode_ipc_descriptor(sample_descriptor(IpcKind::virtual_memory));
  int parsed = 0, refused = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<std::byte> input(seed.begin(), seed.end());
    if (round % 4 == 0) input.resize(generator() % 200);
    const int flips = 1 + static_cast<int>(generator() % 4);
    for (int f = 0; f < flips && !input.empty(); ++f) input[generator() % input.size()] = static_cast<std::byte>(generator());
    try {
      IpcDescriptor d = parse_ipc_descriptor(input);
      EXPECT_LE(d.payload_bytes, IpcDescriptor::payload_capacity);
      EXPECT_TRUE(!d.states_size() || (d.bytes > 0 && d.bytes <= d.allocation_bytes));
      ++parsed;
    } catch (const IpcError& e) {
      EXPECT_EQ(e.reason(), IpcFailure::malformed);
      ++refused;
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(refused, 0);
}

// ---- the channel (no driver) ----

struct ChannelPair {
  IpcChannel a, b;
  ChannelPair() {
    auto [x, y] = IpcChannel::socket_pair();
    a = IpcChannel::adopt(std::move(x));
    b = IpcChannel::adopt(std::move(y));
  }
};

TEST(IpcChannelTest, CarriesADescriptorAndItsFileDescriptor) {
  NoLeakedFiles no_leak;
  ChannelPair p;
  EXPECT_EQ(p.a.peer().uid, ::geteuid());
  EXPECT_EQ(p.a.peer().pid, ::getpid());
  FileDescriptor file(::memfd_create("ipc-test", MFD_CLOEXEC));
  ASSERT_TRUE(file);
  ASSERT_EQ(::write(file.get(), "cudakit", 7), 7);
  IpcDescriptor d = sample_descriptor(IpcKind::virtual_memory);
  p.a.send(d, file.get());
  IpcMessage m = p.b.receive();
  EXPECT_EQ(m.descriptor.kind, IpcKind::virtual_memory);
  ASSERT_TRUE(m.file);
  EXPECT_NE(m.file.get(), file.get()) << "the receiver gets its own descriptor";
  char text[8] = {};
  EXPECT_EQ(::pread(m.file.get(), text, 7, 0), 7);
  EXPECT_STREQ(text, "cudakit");
}

TEST(IpcChannelTest, RefusesWrongFramingAndClosesEveryFileThatCameWithIt) {
  NoLeakedFiles no_leak;
  ChannelPair p;
  FileDescriptor file(::memfd_create("ipc-test", MFD_CLOEXEC));
  const Bytes pool = encode_ipc_descriptor(sample_descriptor(IpcKind::memory_pool));
  const Bytes event = encode_ipc_descriptor(sample_descriptor(IpcKind::event));
  struct Case {
    const char* name;
    std::function<void()> send;
    const char* says;
  } cases[] = {
      {"a pool without its file", [&] { p.a.send_raw(pool.data(), pool.size()); }, "came with 0 file descriptors"},
      {"an event with a file", [&] { p.a.send_raw(event.data(), event.size(), {file.get()}); }, "came with 1"},
      {"a pool with two files", [&] { p.a.send_raw(pool.data(), pool.size(), {file.get(), file.get()}); }, "came with 2"},
      {"five files", [&] { p.a.send_raw(pool.data(), pool.size(), {file.get(), file.get(), file.get(), file.get(), file.get()}); },
       "more file descriptors"},
      {"a short message", [&] { p.a.send_raw(pool.data(), 60, {file.get()}); }, "60 bytes"},
      {"a long message", [&] { std::vector<char> big(4000, 'x'); p.a.send_raw(big.data(), big.size()); }, "longer"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    c.send();
    std::string message;
    try {
      p.b.receive();
    } catch (const IpcError& e) {
      EXPECT_EQ(e.reason(), IpcFailure::malformed);
      message = e.what();
    }
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
    EXPECT_NE(message.find("peer process"), std::string::npos) << message;
  }
  EXPECT_THROW(p.a.send(sample_descriptor(IpcKind::memory_pool)), InvalidArgument) << "a pool needs its file";
  EXPECT_THROW(p.a.send(sample_descriptor(IpcKind::event), file.get()), InvalidArgument) << "an event has none";
}

TEST(IpcChannelTest, APeerThatClosesOrStaysSilentIsAClearError) {
  NoLeakedFiles no_leak;
  {
    ChannelPair p;
    EXPECT_EQ(failure_of([&] { p.b.receive(std::chrono::milliseconds(20)); }), IpcFailure::timed_out);
    p.a = IpcChannel();
    EXPECT_EQ(failure_of([&] { p.b.receive(); }), IpcFailure::peer_closed);
    EXPECT_EQ(failure_of([&] { p.b.send(sample_descriptor(IpcKind::event)); }), IpcFailure::peer_closed);
  }
  {
    // Halfway: the pool arrived, the buffer and the event never will.
    ChannelPair p;
    FileDescriptor file(::memfd_create("ipc-test", MFD_CLOEXEC));
    p.a.send(sample_descriptor(IpcKind::memory_pool), file.get());
    p.a = IpcChannel();
    IpcMessage first = p.b.receive();
    EXPECT_TRUE(first.file);
    EXPECT_EQ(failure_of([&] { p.b.receive(); }), IpcFailure::peer_closed);
  }
  EXPECT_THROW(IpcChannel().receive(), EmptyHandle);
}

// A directory that user 65534 can enter, for its socket.
struct SocketDirectory {
  std::string path;
  SocketDirectory() {
    char name[] = "/tmp/cudakit-ipc-XXXXXX";
    path = ::mkdtemp(name);
    ::chmod(path.c_str(), 0755);
  }
  ~SocketDirectory() { ::rmdir(path.c_str()); }
};

// Starts `child` in a forked process; wait_for_child() returns its exit status (0 =
// passed). The child leaves with _exit: no destructor of the parent's objects runs twice.
pid_t start_child(const std::function<int()>& child) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int code = 99;
    try {
      code = child();
    } catch (...) {
      code = 98;
    }
    ::_exit(code);
  }
  return pid;
}
int wait_for_child(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}
int in_child(const std::function<int()>& child) { return wait_for_child(start_child(child)); }

TEST(IpcChannelTest, ListenerAndConnectorAgreeOnTheSameUser) {
  NoLeakedFiles no_leak;
  SocketDirectory dir;
  IpcListener listener(dir.path + "/s");
  struct stat st{};
  ASSERT_EQ(::stat(listener.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "owner-only";
  int status = in_child([&] {
    IpcChannel c = IpcChannel::connect(listener.path());
    c.send(sample_descriptor(IpcKind::event));
    return c.peer().uid == ::geteuid() ? 0 : 1;
  });
  IpcChannel server = listener.accept();
  EXPECT_EQ(server.receive().descriptor.kind, IpcKind::event);
  EXPECT_EQ(status, 0);
}

constexpr uid_t nobody = 65534;

TEST(IpcChannelTest, APeerOfAnotherUserIsRefusedOnBothSides) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run a child as user " << nobody;
  NoLeakedFiles no_leak;
  SocketDirectory dir;
  IpcListener listener(dir.path + "/s");
  ::chmod(listener.path().c_str(), 0666);  // let the other user reach the socket at all
  // The child, as another user, connects: the listener refuses it; and the child,
  // whose default policy accepts only its own user, refuses the listener (root).
  int status = in_child([&] {
    if (::setgid(nobody) != 0 || ::setuid(nobody) != 0) return 2;
    try {
      IpcChannel::connect(listener.path());
    } catch (const IpcError& e) {
      return e.reason() == IpcFailure::peer_refused && std::strstr(e.what(), "uid 0") != nullptr ? 0 : 3;
    }
    return 4;
  });
  std::string message;
  try {
    listener.accept();
  } catch (const IpcError& e) {
    EXPECT_EQ(e.reason(), IpcFailure::peer_refused);
    message = e.what();
  }
  EXPECT_NE(message.find("uid 65534"), std::string::npos) << message;
  EXPECT_EQ(status, 0) << "the child did not refuse the listener";

  // Named in the policy, the same user is accepted.
  IpcListener open_listener(dir.path + "/t", PeerPolicy::same_user().allow_user(nobody));
  ::chmod(open_listener.path().c_str(), 0666);
  status = in_child([&] {
    if (::setgid(nobody) != 0 || ::setuid(nobody) != 0) return 2;
    IpcChannel c = IpcChannel::connect(open_listener.path(), PeerPolicy::same_user().allow_user(0));
    c.send(sample_descriptor(IpcKind::event));
    return 0;
  });
  IpcChannel accepted = open_listener.accept();
  EXPECT_EQ(accepted.peer().uid, nobody);
  EXPECT_EQ(status, 0);
}

TEST(IpcChannelTest, AListenerNeverReplacesAFileThatIsNotASocket) {
  SocketDirectory dir;
  const std::string path = dir.path + "/file";
  FileDescriptor f(::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  EXPECT_EQ(failure_of([&] { IpcListener l(path); }), IpcFailure::system);
  struct stat st{};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << "the file is still there";
  ::unlink(path.c_str());
}

// ---- pools, allocations and events on the fake driver ----

class IpcFakeTest : public FakeDriverTest {
 protected:
  void configure(fake::Driver& d) override { d.devices.resize(2); }
};

constexpr std::size_t n = 1000;

TEST_F(IpcFakeTest, AConsumerProcessReadsWhatTheProducerWroteBehindItsEvent) {
  NoLeakedFiles no_leak;
  Device device = Device::get(0);
  Stream stream(device);
  const unsigned seed = std::random_device{}();
  const std::vector<float> data = random_floats(n, seed);
  auto sockets = IpcChannel::socket_pair();
  ShareablePool pool(device);
  DeviceBuffer<float> buffer = pool.allocate<float>(stream, n, uninitialized);
  copy(stream, data, buffer);
  SharedEvent ready(device);
  ready.record_after_writes(stream, buffer);

  pid_t child = start_child([&] {
    sockets.first.reset();
    IpcChannel channel = IpcChannel::adopt(std::move(sockets.second));
    Stream consumer(Device::get(0));
    ImportedPool imported = ImportedPool::receive(channel, Device::get(0));
    ImportedBuffer<float> view = imported.receive<float>(channel, consumer, n);
    ImportedEvent done = ImportedEvent::receive(channel, Device::get(0));
    view.after(done, consumer);
    std::vector<float> seen = download(consumer, view.span());
    if (seen != random_floats(n, seed)) return 1;
    view.release();
    bool refused_after_release = false;
    try {
      (void)view.span();
    } catch (const EmptyHandle&) {
      refused_after_release = true;
    }
    channel.send(sample_descriptor(IpcKind::event));  // "released": the producer may free
    return refused_after_release ? 0 : 2;
  });
  sockets.second.reset();
  IpcChannel channel = IpcChannel::adopt(std::move(sockets.first));
  pool.send(channel);
  pool.send(channel, buffer);
  ready.send(channel);
  // The producer frees only after the consumer released its import.
  EXPECT_EQ(channel.receive().descriptor.kind, IpcKind::event);
  EXPECT_EQ(wait_for_child(child), 0);
  buffer.reset();
  stream.synchronize();
}

// One process plays both sides below: the fake lets a process import what it exported.
struct SharedScene {
  Device device = Device::get(0);
  Stream stream{device};
  ShareablePool pool{device};
  DeviceBuffer<float> buffer = pool.allocate<float>(stream, n, zeroed);
  ChannelPair channels;

  ImportedPool import_pool(Device on) {
    pool.send(channels.a);
    return ImportedPool::receive(channels.b, on);
  }
  IpcMessage message(const IpcDescriptor& d) {
    channels.a.send(d);
    return channels.b.receive();
  }
};

TEST_F(IpcFakeTest, AForgedOrStaleDescriptorIsRefusedWithAClearError) {
  NoLeakedFiles no_leak;
  SharedScene s;
  ImportedPool imported = s.import_pool(s.device);
  const IpcDescriptor good = s.pool.descriptor(s.buffer);

  // The elements asked for are not what the descriptor shares.
  EXPECT_NE(ipc_message_of([&] { imported.import<float>(s.stream, s.message(good), n + 1); }).find("4000 bytes"),
            std::string::npos);
  EXPECT_EQ(failure_of([&] { imported.import<double>(s.stream, s.message(good), n); }), IpcFailure::wrong_size);
  // A descriptor that claims more than the allocation has.
  IpcDescriptor larger = good;
  larger.bytes = larger.allocation_bytes = 2 * good.bytes;
  EXPECT_NE(ipc_message_of([&] { imported.import<float>(s.stream, s.message(larger), 2 * n); }).find("driver's allocation"),
            std::string::npos);
  // Another device's UUID.
  IpcDescriptor elsewhere = good;
  elsewhere.device_uuid[3] ^= 0xff;
  EXPECT_EQ(failure_of([&] { imported.import<float>(s.stream, s.message(elsewhere), n); }), IpcFailure::wrong_device);
  // Forged export data.
  IpcDescriptor forged = good;
  forged.payload[9] ^= 0x5a;  // inside what names the pool
  EXPECT_NE(ipc_message_of([&] { imported.import<float>(s.stream, s.message(forged), n); }).find("forged"),
            std::string::npos);
  // Another kind.
  EXPECT_EQ(failure_of([&] { imported.import<float>(s.stream, s.message(SharedEvent(s.device).descriptor()), n); }),
            IpcFailure::wrong_kind);
  // Memory already freed by its producer.
  s.buffer.reset();
  EXPECT_EQ(failure_of([&] { imported.import<float>(s.stream, s.message(good), n); }), IpcFailure::stale);
  s.stream.synchronize();
}

TEST_F(IpcFakeTest, ADescriptorOfAFreedAllocationIsStaleEvenWhenItsSlotWasReused) {
  // The fake's driver, like the H200's, imports an allocation its producer freed: the
  // refusal is the ledger's, checked before the driver is asked.
  NoLeakedFiles no_leak;
  SharedScene s;
  ImportedPool imported = s.import_pool(s.device);
  const IpcDescriptor first = s.pool.descriptor(s.buffer);
  s.buffer.reset();
  DeviceBuffer<float> next = s.pool.allocate<float>(s.stream, n, zeroed);
  const IpcDescriptor second = s.pool.descriptor(next);
  EXPECT_EQ(second.ledger_slot, first.ledger_slot) << "the freed slot is reused";
  EXPECT_NE(second.ledger_generation, first.ledger_generation);
  const int imports = fake().calls(driver::EntryId::MemPoolImportPointer);
  const std::string message = ipc_message_of([&] { imported.import<float>(s.stream, s.message(first), n); });
  EXPECT_NE(message.find("the producer freed that allocation"), std::string::npos) << message;
  EXPECT_EQ(fake().calls(driver::EntryId::MemPoolImportPointer), imports) << "refused before the driver is asked";
  ImportedBuffer<float> view = imported.import<float>(s.stream, s.message(second), n);
  EXPECT_EQ(download(s.stream, view.span()), std::vector<float>(n, 0.0f));
  view.release();
  next.reset();
  s.stream.synchronize();
}

TEST_F(IpcFakeTest, ALedgerThatIsNotASealedMemfdOfItsSizeIsRefused) {
  NoLeakedFiles no_leak;
  SharedScene s;
  auto send_pool_and = [&](int ledger_file) {
    IpcDescriptor ledger;
    ledger.kind = IpcKind::allocation_ledger;
    ledger.device_uuid = s.pool.descriptor().device_uuid;
    s.channels.a.send(s.pool.descriptor(), s.pool.file().get());
    s.channels.a.send(ledger, ledger_file);
  };
  // A memfd of the right size that can still shrink.
  int unsealed = ::memfd_create("not-a-ledger", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(::ftruncate(unsealed, 1 << 20), 0);
  send_pool_and(unsealed);
  std::string message = ipc_message_of([&] { ImportedPool::receive(s.channels.b, s.device); });
  EXPECT_NE(message.find("not sealed"), std::string::npos) << message;
  // A sealed memfd of another size.
  ASSERT_EQ(::ftruncate(unsealed, 4096), 0);
  ::close(unsealed);
  int small = ::memfd_create("small", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(::ftruncate(small, 4096), 0);
  ASSERT_EQ(::fcntl(small, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
  send_pool_and(small);
  ::close(small);
  EXPECT_EQ(failure_of([&] { ImportedPool::receive(s.channels.b, s.device); }), IpcFailure::malformed);
  s.buffer.reset();
  s.stream.synchronize();
}

TEST_F(IpcFakeTest, APoolOrEventIsImportedOnlyOnItsOwnDevice) {
  NoLeakedFiles no_leak;
  SharedScene s;
  s.pool.send(s.channels.a);
  EXPECT_NE(ipc_message_of([&] { ImportedPool::receive(s.channels.b, Device::get(1)); }).find("not device 1"),
            std::string::npos);
  SharedEvent ready(s.device);
  ready.send(s.channels.a);
  EXPECT_EQ(failure_of([&] { ImportedEvent::receive(s.channels.b, Device::get(1)); }), IpcFailure::wrong_device);
  // A pool import refuses an event, an event import a pool.
  ready.send(s.channels.a);
  EXPECT_EQ(failure_of([&] { ImportedPool::receive(s.channels.b, s.device); }), IpcFailure::wrong_kind);
  s.pool.send(s.channels.a);
  EXPECT_EQ(failure_of([&] { ImportedEvent::receive(s.channels.b, s.device); }), IpcFailure::wrong_kind);
}

TEST_F(IpcFakeTest, AnEventThatIsGoneOrForgedIsRefused) {
  NoLeakedFiles no_leak;
  SharedScene s;
  IpcDescriptor d;
  {
    SharedEvent ready(s.device);
    d = ready.descriptor();
    ImportedEvent open(s.message(d), s.device);  // live: opens
    open.wait(s.stream);
  }
  EXPECT_EQ(failure_of([&] { ImportedEvent(s.message(d), s.device); }), IpcFailure::stale);
  IpcDescriptor forged = sample_descriptor(IpcKind::event);
  forged.device_uuid = s.device.uuid();
  EXPECT_EQ(failure_of([&] { ImportedEvent(s.message(forged), s.device); }), IpcFailure::stale);
}

TEST_F(IpcFakeTest, AnImportKeepsItsPoolAndIsReleasedAfterItsUsers) {
  NoLeakedFiles no_leak;
  SharedScene s;
  const std::vector<float> data = random_floats(n, 7);
  copy(s.stream, data, s.buffer);
  ImportedBuffer<float> view;
  {
    ImportedPool imported = s.import_pool(s.device);
    view = imported.import<float>(s.stream, s.message(s.pool.descriptor(s.buffer)), n);
  }  // the pool object goes; the import keeps the imported pool
  Stream other(s.device);
  EXPECT_EQ(download(other, view.span()), data);
  EXPECT_EQ(view.size(), n);
  ImportedBuffer<float> moved = std::move(view);
  EXPECT_TRUE(view.released());
  EXPECT_THROW((void)view.device_pointer(), EmptyHandle);
  moved.release();
  EXPECT_THROW((void)moved.span(), EmptyHandle);
  EXPECT_EQ(moved.size(), 0u);
  s.stream.synchronize();
}

TEST_F(IpcFakeTest, VirtualMemoryIsSharedAndAnAllocationThatClaimsTooMuchIsRefused) {
  NoLeakedFiles no_leak;
  Device device = Device::get(0);
  Stream stream(device);
  const std::vector<float> data = random_floats(n, 11);
  DeviceBuffer<float> weights = allocate_shareable<float>(stream, n, zeroed);
  copy(stream, data, weights);
  const std::size_t granularity = shareable_granularity(device);
  const IpcDescriptor good = shareable_descriptor(weights);
  EXPECT_EQ(good.bytes, n * sizeof(float));
  EXPECT_EQ(good.allocation_bytes, granularity) << "rounded up to the granularity";
  auto message = [&](const IpcDescriptor& d) { return IpcMessage{d, shareable_file(weights)}; };
  {
    ImportedBuffer<float> view = import_shareable<float>(stream, message(good), n);
    EXPECT_EQ(download(stream, view.span()), data);
  }
  IpcDescriptor larger = good;
  larger.allocation_bytes = 2 * granularity;
  EXPECT_NE(ipc_message_of([&] { import_shareable<float>(stream, message(larger), n); }).find("smaller"),
            std::string::npos);
  IpcDescriptor odd = good;
  odd.allocation_bytes = granularity + 4096;
  EXPECT_NE(ipc_message_of([&] { import_shareable<float>(stream, message(odd), n); }).find("granularity"),
            std::string::npos);
  EXPECT_EQ(failure_of([&] { import_shareable<float>(stream, message(good), n - 1); }), IpcFailure::wrong_size);
  IpcDescriptor elsewhere = good;
  elsewhere.device_uuid[0] ^= 1;
  EXPECT_EQ(failure_of([&] { import_shareable<float>(stream, message(elsewhere), n); }), IpcFailure::wrong_device);
  // A file that is not the driver's shareable handle.
  IpcMessage bogus{good, FileDescriptor(::memfd_create("not-a-handle", MFD_CLOEXEC))};
  EXPECT_EQ(failure_of([&] { import_shareable<float>(stream, bogus, n); }), IpcFailure::stale);
  DeviceBuffer<float> plain(stream, n, zeroed);
  EXPECT_THROW(shareable_descriptor(plain), InvalidArgument);
  stream.synchronize();
}

TEST_F(IpcFakeTest, OnlyAShareablePoolsOwnBuffersAreShared) {
  SharedScene s;
  DeviceBuffer<float> plain(s.stream, n, zeroed);
  EXPECT_THROW(s.pool.descriptor(plain), InvalidArgument);
  ShareablePool other(s.device);
  EXPECT_THROW(other.descriptor(s.buffer), InvalidArgument);
  DeviceBuffer<float> moved = std::move(s.buffer);
  EXPECT_THROW(s.pool.descriptor(s.buffer), EmptyHandle);
  s.buffer = std::move(moved);
}

TEST_F(IpcFakeTest, ADeviceThatCannotShareFileDescriptorsSaysSo) {
  fake().devices[0].attributes[CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES] = 0;
  EXPECT_THROW(ShareablePool(Device::get(0)), FeatureUnavailable);
}

}  // namespace
}  // namespace cudakit
