package console

import (
	"embed"
	"io/fs"
)

//go:embed web
var webFiles embed.FS

// assets are the browser side of the console, served as they are: plain
// HTML, CSS and JavaScript with no build step.
func assets() fs.FS {
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the embed pattern above guarantees the directory
	}
	return sub
}
