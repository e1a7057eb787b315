package names

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// MaxLength is the longest name a naming template may produce.
	MaxLength = 63
	// RandomLength is the length of a random suffix.
	RandomLength = 5
)

// Random returns n random characters (utilrand.String outside tests, a
// fixed sequence in them).
type Random func(n int) string

// Render executes nameTemplate over data plus .random (five random
// characters). A missing key is an error, not an empty string. A result
// longer than 63 characters is cut to 58 and given a fresh random suffix;
// the result must be a valid object name. The errors say which stage failed
// ("cannot be parsed", "cannot be rendered", "is not a valid object name")
// and leave the field's name to the caller.
func Render(nameTemplate string, data map[string]any, random Random) (string, error) {
	tpl, err := template.New("name").Option("missingkey=error").Parse(nameTemplate)
	if err != nil {
		return "", fmt.Errorf("cannot be parsed: %w", err)
	}
	withRandom := make(map[string]any, len(data)+1)
	for k, v := range data {
		withRandom[k] = v
	}
	withRandom["random"] = random(RandomLength)
	var buf bytes.Buffer
	if err := tpl.Execute(&buf, withRandom); err != nil {
		return "", fmt.Errorf("cannot be rendered: %w", err)
	}
	name := buf.String()
	if len(name) > MaxLength {
		name = name[:MaxLength-RandomLength] + random(RandomLength)
	}
	if problems := validation.IsDNS1123Subdomain(name); len(problems) > 0 {
		return "", fmt.Errorf("renders %q, which is not a valid object name: %s", name, strings.Join(problems, "; "))
	}
	return name, nil
}

// WithPrefix is prefix followed by a random suffix, the prefix cut so that
// the name stays within 63 characters (what the API server does with
// metadata.generateName).
func WithPrefix(prefix string, random Random) string {
	if len(prefix) > MaxLength-RandomLength {
		prefix = prefix[:MaxLength-RandomLength]
	}
	return prefix + random(RandomLength)
}
