package templates

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"sigs.k8s.io/yaml"
)

// DefaultConfigPath is where variables are read from when no --config is
// given: $XDG_CONFIG_HOME/capstan/capstan.yaml, or
// ~/.config/capstan/capstan.yaml.
func DefaultConfigPath() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "capstan", "capstan.yaml")
}

// LoadConfig reads template variables from a YAML file of top-level
// `KEY: value` pairs. Numbers and booleans become their text; entries whose
// value is a list or a map are not variables and are skipped (a clusterctl
// configuration's providers or images, for instance). When optional is
// true a missing file is no error and gives no variables.
func LoadConfig(path string, optional bool) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if optional && errors.Is(err, fs.ErrNotExist) {
			return map[string]string{}, nil
		}
		return nil, fmt.Errorf("reading the variables file: %w", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: not a YAML map of KEY: value pairs: %w", path, err)
	}
	vars := make(map[string]string, len(doc))
	for k, v := range doc {
		switch v.(type) {
		case map[string]any, []any:
			continue
		}
		if !validName.MatchString(k) {
			return nil, fmt.Errorf("%s: %q is not a variable name: use letters, digits and underscores, not starting with a digit", path, k)
		}
		switch v := v.(type) {
		case string:
			vars[k] = v
		case bool:
			vars[k] = strconv.FormatBool(v)
		case float64:
			vars[k] = strconv.FormatFloat(v, 'f', -1, 64)
		case nil:
			vars[k] = ""
		}
	}
	return vars, nil
}
