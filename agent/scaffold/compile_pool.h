// CompilePool: a run's compile slots, by default one per core the process
// may run on. Every build of a run (its candidates' and, at run start, its
// references') holds a slot while it compiles, so a run with more chains
// than cores never has more compilers than cores competing for them.
// Slots are granted in the order they were asked for (a ticket each): no
// compile waits behind one that was asked for after it, so the evaluation
// queues get their candidates in the order the model answered.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace kloop {

struct CompilePoolFigures {
  int slots = 0;
  int asked = 0;               // slots asked for
  int builds = 0;              // slots given back
  int most_in_flight = 0;      // the most slots held at once
  double wait_seconds = 0;     // summed over builds: asked for a slot until granted
};

class CompilePool {
 public:
  explicit CompilePool(int slots);
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  // One slot, held for as long as the Slot lives.
  class Slot {
   public:
    Slot(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    Slot& operator=(Slot&&) = delete;
    ~Slot();

   private:
    friend class CompilePool;
    explicit Slot(CompilePool* owner) : owner_(owner) {}
    CompilePool* owner_;
  };

  // Waits until every earlier request has its slot and one is free.
  Slot acquire();
  int size() const { return slots_; }
  CompilePoolFigures figures() const;

 private:
  void release();

  const int slots_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t next_ticket_ = 0;   // the next request's
  std::uint64_t serving_ = 0;       // the oldest request not yet granted
  int in_flight_ = 0;
  CompilePoolFigures figures_;
};

// The cores this process may run on (its CPU affinity, which Slurm and
// cgroup cpusets narrow), at least 1; the default size of a run's pool.
int available_cores();

}  // namespace kloop
