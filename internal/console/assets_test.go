package console

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// The browser side builds its DOM from API data with textContent and
// createElement only: any of these would let a condition message or an
// event be parsed as HTML (and run as script).
var htmlSinks = regexp.MustCompile(`\.innerHTML\b|\.outerHTML\s*=|insertAdjacentHTML|document\.write|\beval\(|new Function\(|createContextualFragment`)

func TestAssetsNeverParseHTML(t *testing.T) {
	web := assets()
	scripts := 0
	err := fs.WalkDir(web, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(path, ".js") {
			return err
		}
		scripts++
		src, err := fs.ReadFile(web, path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if htmlSinks.MatchString(line) {
				t.Errorf("%s:%d parses HTML: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scripts == 0 {
		t.Fatal("no scripts embedded: the console would be an empty page")
	}
}

// Every module the page loads is embedded: a missing file would show as
// a blank page only in a browser.
func TestAssetsImportsResolve(t *testing.T) {
	web := assets()
	index, err := fs.ReadFile(web, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"#:]+)"`).FindAllStringSubmatch(string(index), -1)
	imports := regexp.MustCompile(`from '\./([^']+)'`)
	seen := map[string]bool{}
	var check func(from, name string)
	check = func(from, name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		src, err := fs.ReadFile(web, name)
		if err != nil {
			t.Errorf("%s loads %s: %v", from, name, err)
			return
		}
		if strings.HasSuffix(name, ".js") {
			for _, m := range imports.FindAllStringSubmatch(string(src), -1) {
				check(name, m[1])
			}
		}
	}
	for _, r := range refs {
		check("index.html", r[1])
	}
	if !seen["app.js"] || !seen["style.css"] {
		t.Errorf("index.html loads %v, want app.js and style.css among them", seen)
	}
}
