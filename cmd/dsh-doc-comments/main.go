// Command dsh-doc-comments gives a package outside dsh's module what dsh's
// own packages have: its tools' argument descriptions (and its plugins'
// config descriptions) from the fields' doc comments. A deployed binary has
// no source, so it writes them into a file of the package, whose init
// registers them with host.AddDocComments. Put this line in the package and
// run go generate:
//
//	//go:generate go run github.com/dshdev/dsh/cmd/dsh-doc-comments
//
// It reads the package in the current directory (go generate runs there)
// and writes doc_comments_gen.go, or -out.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/dshdev/dsh/internal/schema"
)

func main() {
	out := flag.String("out", "doc_comments_gen.go", "file to write")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "dsh-doc-comments:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	// The package's name and import path, as the go command sees them. A
	// program's types reflect under "main", whatever its import path.
	cmd := exec.Command("go", "list", "-f", "{{.Name}} {{.ImportPath}}", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	listed, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	name, path, _ := strings.Cut(strings.TrimSpace(string(listed)), " ")
	if name == "main" {
		path = "main"
	}
	src, err := schema.GeneratePackageComments(".", name, path)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}
