package terminalkubernetes

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshdev/dsh/plugins/terminal-kubernetes/kubetest"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// BenchmarkExecTrue measures one command round trip through a pod's kept
// exec: `true`, settled by its end marker and prompt.
func BenchmarkExecTrue(b *testing.B) {
	c := kubetest.Require(b)
	bk := newBackend(b, testConfig(c, c.Namespace(b)))
	s := spawn(b, bk, "bench")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		sn, err := s.Exec(ctx, termapi.ExecRequest{Command: "true", Stream: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sn.Output(ctx); err != io.EOF {
			b.Fatalf("output: %v", err)
		}
		if res, err := sn.Wait(ctx); err != nil || res.Exec == nil || res.Exec.State != termapi.ExecCompleted {
			b.Fatalf("result %+v, %v", res, err)
		}
	}
}

// BenchmarkSpawn measures an owner's first session from nothing to its
// prompt and back: the pod created and Running, the shell's and the
// helper's execs opened, bash at its prompt, then the pod deleted (grace
// period 0). The helper comes by an init container that copies it from
// its image (helperImage), or is in the shell's image already (helperPath,
// the test image has it at /usr/local/bin/dsh-kube-helper): the init
// container costs its own start, and the kubelet notices that it has
// ended only at its next look at the pod's containers (up to a second).
// With DSH_BENCH_PARALLEL=N, N owners start at once per iteration and the
// time is per iteration.
func BenchmarkSpawn(b *testing.B) {
	c := kubetest.Require(b)
	for _, mode := range []struct {
		name       string
		helperPath string
	}{{"helper=init-container", ""}, {"helper=in-image", helperInTestImage}} {
		b.Run(mode.name, func(b *testing.B) {
			cfg := testConfig(c, c.Namespace(b))
			if mode.helperPath != "" {
				cfg.HelperImage = ""
				cfg.HelperPath = mode.helperPath
			}
			benchSpawn(b, newBackend(b, cfg))
		})
	}
}

// helperInTestImage is where the test cluster's shell image
// (cmd/dsh-kube-image) has the pod helper.
const helperInTestImage = "/usr/local/bin/dsh-kube-helper"

func benchSpawn(b *testing.B, bk *Backend) {
	n, _ := strconv.Atoi(os.Getenv("DSH_BENCH_PARALLEL"))
	n = max(n, 1)
	start := time.Now()
	sessions := 0
	for i := 0; b.Loop(); i++ {
		var wg sync.WaitGroup
		for j := range n {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), waitLong)
				defer cancel()
				id := fmt.Sprintf("bench-%d-%d", i, j)
				s, err := bk.Spawn(ctx, termapi.SpawnSpec{SessionID: id, OwnerID: id})
				if err != nil {
					b.Error(err)
					return
				}
				if err := s.Close(ctx, "bench"); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		sessions += n
	}
	b.ReportMetric(float64(sessions)/time.Since(start).Seconds(), "sessions/s")
}

// TestIdlePodMemory reports what an idle owner's pod costs the node: the
// memory its shell container's cgroup charges (the helper, the shell at
// its prompt, page cache of what they read), as the container sees it;
// and, where the test runs on the test cluster's node (DSH_TEST_KUBE_DIR,
// scripts/kubernetes/cluster.sh), what ten idle pods add there per pod:
// the pods' cgroups (sandbox and containers), the container runtime's
// shims, and the kubelet's and containerd's own memory (proportional set
// sizes). It only reports;
// it asserts nothing about the numbers.
func TestIdlePodMemory(t *testing.T) {
	c := kubetest.Require(t)
	b := newBackend(t, testConfig(c, c.Namespace(t)))
	const n = 10
	before := readNode(t)
	var total int64
	for i := range n {
		s := spawn(t, b, fmt.Sprintf("idle-%d", i))
		out := mustComplete(t, s, "cat /sys/fs/cgroup/memory.current 2>/dev/null || cat /sys/fs/cgroup/memory/memory.usage_in_bytes", 0)
		v, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatalf("session %d: memory %q", i, out)
		}
		total += v
	}
	t.Logf("an idle pod's shell container charges %.1f MiB to its cgroup (mean of %d)", float64(total)/n/(1<<20), n)
	if before == nil {
		return
	}
	after := readNode(t)
	for _, k := range []string{"pods", "shims", "kubelet", "containerd"} {
		t.Logf("node, per idle pod: %s %+.1f MiB", k, float64(after[k]-before[k])/n/(1<<20))
	}
}

// readNode reads the test cluster's node, when the test runs on it: the
// memory its pods' cgroup charges, and the proportional set size of its
// containerd shims, kubelet and containerd. nil elsewhere.
func readNode(t *testing.T) map[string]int64 {
	t.Helper()
	dir := os.Getenv("DSH_TEST_KUBE_DIR")
	if dir == "" {
		return nil
	}
	name, err := os.ReadFile(filepath.Join(dir, "cgroup"))
	if err != nil {
		return nil
	}
	cg := strings.TrimSpace(string(name))
	got := map[string]int64{}
	usage, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", cg, "pods", "memory.usage_in_bytes"))
	if err != nil {
		t.Logf("the node's pods cgroup: %v", err)
		return nil
	}
	got["pods"], _ = strconv.ParseInt(strings.TrimSpace(string(usage)), 10, 64)
	procs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/pids", cg, "*", "cgroup.procs"))
	deeper, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/pids", cg, "system", "*", "cgroup.procs"))
	for _, f := range append(procs, deeper...) {
		data, _ := os.ReadFile(f)
		for _, pid := range strings.Fields(string(data)) {
			comm, _ := os.ReadFile("/proc/" + pid + "/comm")
			key := ""
			switch c := strings.TrimSpace(string(comm)); {
			case strings.HasPrefix(c, "containerd-shim"):
				key = "shims"
			case c == "kubelet" || c == "containerd":
				key = c
			default:
				continue
			}
			// The proportional share: the shims share their binary's pages.
			rollup, _ := os.ReadFile("/proc/" + pid + "/smaps_rollup")
			for line := range strings.Lines(string(rollup)) {
				if v, ok := strings.CutPrefix(line, "Pss:"); ok {
					kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
					got[key] += kb << 10
				}
			}
		}
	}
	return got
}
