package terminalkubernetes

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/dshdev/dsh/plugins/terminal/inband"
)

// A program run beside the shell (the session's files, inband.FarFiles)
// gets its input through the exec's stdin. The container runtime
// (containerd's CRI: 1.6 here, 2.x too by its issues 12734 and 13934)
// closes an exec's stdin as soon as the process's stdout and stderr have
// ended, read or not: `cat >FILE` ends its stdout at once, so FILE got the
// first 192 KiB of a 590 KB output, and the exec still reported exit
// status 0. So the program runs under feedScript: a bash that holds the
// exec's stdout and stderr until the program has ended, and hands it
// exactly the input's length (`head -c N`), so that its input never ends
// at the stream's end; and the exec's stdin stays open until the exit
// status has come.

// feedScript runs "$@" with exactly $1 bytes of stdin as its input, and
// exits with its status. The command after the pipeline keeps bash there
// (no exec of the last command), and with it the exec's stdout and stderr.
const feedScript = `n=$1; shift; head -c "$n" | "$@"; exit "${PIPESTATUS[1]}"`

// runInPod runs argv in container of pod, without a TTY, as the shell's
// user, with stdin as its input, and returns its output and exit status
// (an inband.FarRun).
func (b *Backend) runInPod(ctx context.Context, pod, container string, argv []string, stdin []byte) (inband.FarResult, error) {
	command := append([]string{"bash", "--noprofile", "--norc", "-c", feedScript, "dsh-feed", strconv.Itoa(len(stdin))}, argv...)
	req := b.api.CoreV1().RESTClient().Post().
		Namespace(b.ns).Resource("pods").Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   command,
			Stdin:     true,
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)
	ex, err := b.executor(req.URL())
	if err != nil {
		return inband.FarResult{}, err
	}
	// The input, then a stdin that stays open until the exec has ended.
	inR, inW := io.Pipe()
	go func() {
		// A program that ended before it read everything closes inR
		// (below): the rest is not wanted, and the error says only that.
		inW.Write(stdin)
	}()
	var out, errOut bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: &out, Stderr: &errOut})
	// The exec's stdin copier (and the writer above, if the program ended
	// before it read everything) end here.
	inR.CloseWithError(io.EOF)
	code, ok := exitCode(err)
	if !ok {
		return inband.FarResult{}, fmt.Errorf("exec in pod %s: %w", pod, err)
	}
	return inband.FarResult{Stdout: out.Bytes(), Stderr: errOut.Bytes(), Code: code}, nil
}
