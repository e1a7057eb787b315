package machineset

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"

	"capstan.dev/capstan/internal/contract"
)

// Machine names follow the Kubernetes convention for generated names: at
// most 63 characters, the last five of them random.
const (
	maxNameLength = 63
	randomLength  = 5
)

// defaultNameTemplate names Machines when spec.machineNaming.template is not
// set.
const defaultNameTemplate = "{{ .machineSet.name }}-{{ .random }}"

// randomPlaceholder must appear in every naming template, so that names do
// not collide.
const randomPlaceholder = "{{ .random }}"

// machineName renders a naming template for a new Machine of the named
// MachineSet. The template sees .cluster.name, .machineSet.name and .random
// (five random consonants and digits). A name longer than 63 characters is
// cut to 58 and given a fresh random suffix. random supplies the random
// strings (utilrand.String outside tests).
func machineName(nameTemplate, clusterName, machineSetName string, random func(int) string) (string, error) {
	if nameTemplate == "" {
		nameTemplate = defaultNameTemplate
	}
	if !strings.Contains(nameTemplate, randomPlaceholder) {
		return "", fmt.Errorf("spec.machineNaming.template %q must contain %s so that Machine names never collide", nameTemplate, randomPlaceholder)
	}
	tpl, err := template.New("machine name").Option("missingkey=error").Parse(nameTemplate)
	if err != nil {
		return "", fmt.Errorf("spec.machineNaming.template %q cannot be parsed: %w", nameTemplate, err)
	}
	data := map[string]any{
		"cluster":    map[string]any{"name": clusterName},
		"machineSet": map[string]any{"name": machineSetName},
		"random":     random(randomLength),
	}
	var buf bytes.Buffer
	if err := tpl.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("spec.machineNaming.template %q cannot be rendered (it may use .cluster.name, .machineSet.name and .random): %w", nameTemplate, err)
	}
	name := buf.String()
	if len(name) > maxNameLength {
		name = name[:maxNameLength-randomLength] + random(randomLength)
	}
	if problems := validation.IsDNS1123Subdomain(name); len(problems) > 0 {
		return "", fmt.Errorf("spec.machineNaming.template %q renders %q, which is not a valid object name: %s", nameTemplate, name, strings.Join(problems, "; "))
	}
	return name, nil
}

func randomString(n int) string { return utilrand.String(n) }

// ownedKeys returns the keys of metadata.labels or metadata.annotations
// (field is "labels" or "annotations") that manager set through updates or
// patches of the object itself, as its managed fields record them. They are
// the keys the MachineSet put on a Machine, so the ones it may take away when
// the template drops them; keys others set are left alone.
func ownedKeys(obj metav1.Object, manager, field string) map[string]bool {
	owned := map[string]bool{}
	for _, fields := range contract.FieldsSetBy(obj, manager) {
		md, _ := fields["f:metadata"].(map[string]any)
		set, _ := md["f:"+field].(map[string]any)
		for k := range set {
			if key, ok := strings.CutPrefix(k, "f:"); ok {
				owned[key] = true
			}
		}
	}
	return owned
}
