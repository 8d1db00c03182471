// Command gencatalog writes dsh's catalogs (see internal/catalog) into a
// directory: go generate runs it for catalog/.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/catalog"
	_ "github.com/dshdev/dsh/plugins/standard"
)

func main() {
	dir := flag.String("out", ".", "the directory to write the catalogs into")
	flag.Parse()
	c, err := catalog.Build(context.Background(), host.DefaultRegistry())
	if err != nil {
		fmt.Fprintln(os.Stderr, "gencatalog:", err)
		os.Exit(1)
	}
	files, err := c.Files()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gencatalog:", err)
		os.Exit(1)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(filepath.Join(*dir, name), files[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gencatalog:", err)
			os.Exit(1)
		}
	}
}
