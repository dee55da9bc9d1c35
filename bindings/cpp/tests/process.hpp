// process.hpp: runs the test worker program (worker_main.cpp), or another
// program such as the leases CLI, as a real child process: spawn with its stdout on a pipe, read its lines, signal it, wait
// for its exit with a bound (a hung child is killed and reported).
#ifndef LEASES_TESTS_PROCESS_HPP
#define LEASES_TESTS_PROCESS_HPP

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <leases/leases.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

extern char **environ;

namespace leases_test {

#ifndef LEASES_CPP_WORKER
#error "LEASES_CPP_WORKER must name the test worker program"
#endif

class Child {
public:
    // The test worker program with args.
    explicit Child(const std::vector<std::string> &args) : Child(LEASES_CPP_WORKER, args) {}
    // program (a path) with args.
    Child(const std::string &program, const std::vector<std::string> &args) {
        int fds[2];
        if (pipe(fds) != 0) {
            throw std::runtime_error("pipe failed");
        }
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
        posix_spawn_file_actions_addclose(&actions, fds[0]);
        posix_spawn_file_actions_addclose(&actions, fds[1]);
        std::vector<std::string> all{program};
        all.insert(all.end(), args.begin(), args.end());
        std::vector<char *> argv;
        for (auto &a : all) {
            argv.push_back(a.data());
        }
        argv.push_back(nullptr);
        const int rc = posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        close(fds[1]);
        out_ = fds[0];
        if (rc != 0) {
            close(out_);
            throw std::runtime_error("posix_spawn failed");
        }
    }
    Child(const Child &) = delete;
    Child &operator=(const Child &) = delete;
    ~Child() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            int status = 0;
            waitpid(pid_, &status, 0);
        }
        close(out_);
    }

    // The child's next line of output; throws if none comes within timeout.
    std::string line(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            const auto nl = buf_.find('\n');
            if (nl != std::string::npos) {
                std::string l = buf_.substr(0, nl);
                buf_.erase(0, nl + 1);
                return l;
            }
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) {
                throw std::runtime_error("the child printed no line in time (so far: " + buf_ + ")");
            }
            pollfd p{out_, POLLIN, 0};
            if (poll(&p, 1, static_cast<int>(left.count())) < 0) {
                continue;
            }
            char chunk[512];
            const ssize_t n = read(out_, chunk, sizeof chunk);
            if (n == 0) {
                throw std::runtime_error("the child closed its output (so far: " + buf_ + ")");
            }
            if (n > 0) {
                buf_.append(chunk, static_cast<std::size_t>(n));
            }
        }
    }

    void signal(int sig) { kill(pid_, sig); }

    // The exit status (WEXITSTATUS), or -signal if a signal ended it; the
    // child is killed and the test fails if it has not exited within timeout.
    int wait(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
        // The output pipe closes when the child exits: poll it for EOF.
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) {
                throw std::runtime_error("the child did not exit in time");
            }
            pollfd p{out_, POLLIN, 0};
            if (poll(&p, 1, static_cast<int>(left.count())) > 0) {
                char chunk[512];
                const ssize_t n = read(out_, chunk, sizeof chunk);
                if (n > 0) {
                    buf_.append(chunk, static_cast<std::size_t>(n));
                    continue;
                }
                if (n == 0) {
                    break;
                }
            }
        }
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }

    // What the child printed after the last line() read.
    const std::string &rest() const { return buf_; }

private:
    pid_t pid_ = -1;
    int out_ = -1;
    std::string buf_;
};

inline leases::JobState job_state(leases::Authority &a, const std::string &id) {
    for (const leases::Job &j : a.jobs("p")) {
        if (j.id == id) {
            return j.state;
        }
    }
    throw std::runtime_error("job " + id + " not listed");
}

// A worker process on location (production "p" of a) stopped by sig while
// its handler runs drains: exit 0, its job completed, the next one not
// claimed. Both stores' tests run it.
inline void expect_a_signal_mid_job_drains_a_worker_process(leases::Authority &a, const std::string &location,
                                                            int sig) {
    const std::string first = a.request_job("p");
    const std::string second = a.request_job("p");
    Child child({location, "p", "finish", "0"});
    EXPECT_EQ(child.line(), "ready");
    EXPECT_EQ(child.line(), "started " + first);
    child.signal(sig);
    EXPECT_EQ(child.wait(), 0) << child.rest();
    EXPECT_EQ(job_state(a, first), leases::JobState::Completed);
    EXPECT_EQ(job_state(a, second), leases::JobState::Requested) << "claimed after the stop request";
}

// A worker process whose handler never returns, stopped by sig, releases its
// job once its drain timeout (300 ms) passed and exits 3.
inline void expect_a_signal_past_the_drain_timeout_releases_the_job(leases::Authority &a,
                                                                    const std::string &location, int sig) {
    const std::string id = a.request_job("p");
    Child child({location, "p", "hang", "300"});
    EXPECT_EQ(child.line(), "ready");
    EXPECT_EQ(child.line(), "started " + id);
    EXPECT_EQ(job_state(a, id), leases::JobState::Claimed);
    child.signal(sig);
    EXPECT_EQ(child.wait(), 3) << child.rest();
    EXPECT_EQ(job_state(a, id), leases::JobState::Requested) << "the claim was left to expire";
}

}  // namespace leases_test

#endif
