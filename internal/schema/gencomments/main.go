// Command gencomments writes internal/schema/comments_gen.go: the doc comments
// of the module's exported types and fields, so a binary without source still
// gives its schemas their descriptions. Run it through `go generate ./...`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dshdev/dsh/internal/schema"
)

func main() {
	out := flag.String("out", "comments_gen.go", "file to write")
	root := flag.String("root", "../..", "module root")
	flag.Parse()
	src, err := schema.GenerateComments(*root)
	if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gencomments:", err)
		os.Exit(1)
	}
}
