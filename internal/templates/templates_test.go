package templates

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func lookupFrom(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestRender(t *testing.T) {
	tests := []struct {
		name, tmpl string
		vars       map[string]string
		want       string
		wantErr    string
	}{
		{name: "plain", tmpl: "a: ${A}", vars: map[string]string{"A": "1"}, want: "a: 1"},
		{name: "default used", tmpl: "a: ${A:=x}", want: "a: x"},
		{name: "value beats default", tmpl: "a: ${A:=x}", vars: map[string]string{"A": "y"}, want: "a: y"},
		{name: "empty value is a value", tmpl: "a: '${A}'", vars: map[string]string{"A": ""}, want: "a: ''"},
		{name: "empty default", tmpl: "a: '${A:=}'", want: "a: ''"},
		{name: "every missing variable named once, sorted", tmpl: "${B} ${A} ${B}", wantErr: "[A, B]"},
		{name: "bad name", tmpl: "${A-B}", wantErr: "malformed variable reference ${A-B}"},
		{name: "empty reference", tmpl: "${}", wantErr: "malformed variable reference ${}"},
		{name: "unclosed", tmpl: "a: ${A\nb: 1", vars: map[string]string{"A": "1"}, wantErr: "no closing brace"},
		{name: "jinja braces left alone", tmpl: "n: '{{ ds.meta_data.local_hostname }}'", want: "n: '{{ ds.meta_data.local_hostname }}'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render(tc.tmpl, lookupFrom(tc.vars))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if got != "" {
					t.Fatalf("returned a half-rendered manifest %q with the error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	var missing *MissingVariablesError
	if _, err := Render("${X}", lookupFrom(nil)); !errors.As(err, &missing) || missing.Names[0] != "X" {
		t.Errorf("missing variables are not a MissingVariablesError: %v", err)
	}
}

func TestLocalDefaultTemplate(t *testing.T) {
	tmpl, err := Local("")
	if err != nil {
		t.Fatal(err)
	}
	vars, err := Variables(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"CLUSTER_NAME", "NAMESPACE", "KUBERNETES_VERSION", "CONTROL_PLANE_MACHINE_COUNT", "WORKER_MACHINE_COUNT"} {
		if _, ok := vars[v]; !ok {
			t.Errorf("template does not use %s", v)
		}
	}
	out, err := Render(tmpl, lookupFrom(map[string]string{"CLUSTER_NAME": "demo", "NAMESPACE": "default", "KUBERNETES_VERSION": "v1.35.8",
		"CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("rendered document does not parse: %v\n%s", err, doc)
		}
		kinds = append(kinds, obj["kind"].(string))
	}
	if got := strings.Join(kinds, ","); got != "Cluster,LocalCluster,LocalMachineTemplate,KubeadmControlPlane,LocalMachineTemplate,KubeadmConfigTemplate,MachineDeployment" {
		t.Errorf("kinds %s", got)
	}
	if _, err := Local("nope"); err == nil {
		t.Error("unknown flavor accepted")
	}
}
