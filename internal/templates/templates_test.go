package templates

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
		{name: "dollar without brace left alone", tmpl: "run: echo $HOME $ {A}", want: "run: echo $HOME $ {A}"},
		{name: "default with colons and spaces", tmpl: "u: ${URL:=https://x:6443/a b}", want: "u: https://x:6443/a b"},
		{name: "a default serves every reference", tmpl: "${A} ${A:=1} ${A}", want: "1 1 1"},
		{name: "first default wins", tmpl: "${A:=1} ${A:=2}", want: "1 1"},
		{name: "brace after a reference is text", tmpl: "${A}}", vars: map[string]string{"A": "x"}, want: "x}"},
		{name: "adjacent references", tmpl: "${A}${B}", vars: map[string]string{"A": "x", "B": "y"}, want: "xy"},
		{name: "value is not expanded again", tmpl: "${A}", vars: map[string]string{"A": "${B}"}, want: "${B}"},
		{name: "name starting with a digit", tmpl: "${1A}", wantErr: "line 1: malformed variable reference ${1A}"},
		{name: "name with a space", tmpl: "${A B}", wantErr: "malformed variable reference ${A B}"},
		{name: "shell default syntax", tmpl: "x\n${A:-1}", wantErr: "line 2: malformed variable reference ${A:-1}"},
		{name: "empty name with default", tmpl: "${:=x}", wantErr: "malformed variable reference ${:=x}"},
		{name: "unterminated at the end", tmpl: "a: 1\nb: ${A", wantErr: `line 2: malformed variable reference: "${A" has no closing brace`},
		{name: "unterminated default", tmpl: "a: ${A:=x\n}", wantErr: "has no closing brace"},
		{name: "lone dollar brace", tmpl: "a: ${", wantErr: "no closing brace"},
		{name: "nested reference", tmpl: "a: ${A${B}}", vars: map[string]string{"A": "1", "B": "2"}, wantErr: "a reference cannot hold another"},
		{name: "nested in a default", tmpl: "a: ${A:=${B}}", vars: map[string]string{"B": "2"}, wantErr: "a reference cannot hold another"},
		{name: "malformed beats missing", tmpl: "${MISSING} ${A-B}", wantErr: "malformed"},
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

func TestBuiltinDefaultTemplates(t *testing.T) {
	for infrastructure, wantKinds := range map[string]string{
		"local":     "Cluster,LocalCluster,LocalMachineTemplate,KubeadmControlPlane,LocalMachineTemplate,KubeadmConfigTemplate,MachineDeployment",
		"in-memory": "Cluster,InMemoryCluster,InMemoryMachineTemplate,KubeadmControlPlane,InMemoryMachineTemplate,KubeadmConfigTemplate,MachineDeployment",
		"qemu":      "Cluster,QEMUCluster,QEMUMachineTemplate,KubeadmControlPlane,QEMUMachineTemplate,KubeadmConfigTemplate,MachineDeployment,MachineHealthCheck",
	} {
		tmpl, err := Builtin(infrastructure, "")
		if err != nil {
			t.Fatal(err)
		}
		vars, err := Variables(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"CLUSTER_NAME", "NAMESPACE", "KUBERNETES_VERSION", "CONTROL_PLANE_MACHINE_COUNT", "WORKER_MACHINE_COUNT"} {
			if _, ok := vars[v]; !ok {
				t.Errorf("%s: template does not use %s", infrastructure, v)
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
				t.Fatalf("%s: rendered document does not parse: %v\n%s", infrastructure, err, doc)
			}
			kinds = append(kinds, obj["kind"].(string))
		}
		if got := strings.Join(kinds, ","); got != wantKinds {
			t.Errorf("%s: kinds %s", infrastructure, got)
		}
		if _, err := Builtin(infrastructure, "nope"); err == nil {
			t.Errorf("%s: unknown flavor accepted", infrastructure)
		}
	}
	if got := strings.Join(Infrastructures(), ","); got != "in-memory,local,qemu" {
		t.Errorf("infrastructures %s", got)
	}
	if _, err := Builtin("aws", ""); err == nil || !strings.Contains(err.Error(), "in-memory, local, qemu") {
		t.Errorf("unknown provider: %v; want the list of providers with templates", err)
	}
}

func TestRenderWithFallback(t *testing.T) {
	lookup := lookupFrom(map[string]string{"SET": "lookup"})
	fallback := lookupFrom(map[string]string{"SET": "fallback", "DEF": "fallback", "ONLY": "fallback"})
	got, err := RenderWithFallback("${SET} ${DEF:=template} ${ONLY}", lookup, fallback)
	if want := "lookup template fallback"; err != nil || got != want {
		t.Errorf("got %q, %v; want %q (lookup, then template defaults, then fallback)", got, err, want)
	}
	if _, err := RenderWithFallback("${NONE} ${ONLY}", lookup, fallback); err == nil || err.Error() != (&MissingVariablesError{Names: []string{"NONE"}}).Error() {
		t.Errorf("missing with a fallback: %v", err)
	}
}

func TestVariablesAndDefault(t *testing.T) {
	vars, err := Variables("${A} ${B:=1} ${C:=} ${B}")
	if err != nil || len(vars) != 3 || vars["A"] != "" || vars["B"] != "1" || vars["C"] != "" {
		t.Errorf("Variables = %v, %v", vars, err)
	}
	if _, err := Variables("${A"); err == nil {
		t.Error("Variables accepted an unclosed reference")
	}
	if v, ok, err := Default("${C:=} ${A}", "C"); err != nil || !ok || v != "" {
		t.Errorf("Default(C) = %q, %v, %v; want an empty default", v, ok, err)
	}
	if _, ok, _ := Default("${A}", "A"); ok {
		t.Error("Default(A) found a default that is not there")
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write("ok.yaml", "KUBERNETES_VERSION: v1.35.8\nWORKER_MACHINE_COUNT: 3\nFLAG: true\nEMPTY:\nproviders:\n- name: x\ncert-manager:\n  timeout: 10m\n")
	vars, err := LoadConfig(p, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"KUBERNETES_VERSION": "v1.35.8", "WORKER_MACHINE_COUNT": "3", "FLAG": "true", "EMPTY": ""}
	if fmt.Sprint(vars) != fmt.Sprint(want) {
		t.Errorf("LoadConfig = %v, want %v (lists and maps are not variables)", vars, want)
	}
	if vars, err := LoadConfig(filepath.Join(dir, "absent.yaml"), true); err != nil || len(vars) != 0 {
		t.Errorf("optional absent file: %v, %v", vars, err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "absent.yaml"), false); err == nil {
		t.Error("a --config file that does not exist is no error")
	}
	if _, err := LoadConfig(write("list.yaml", "- a\n- b\n"), false); err == nil || !strings.Contains(err.Error(), "KEY: value") {
		t.Errorf("a list: %v", err)
	}
	if _, err := LoadConfig(write("badname.yaml", "WORKER-COUNT: 3\n"), false); err == nil || !strings.Contains(err.Error(), `"WORKER-COUNT" is not a variable name`) {
		t.Errorf("a bad name: %v", err)
	}
}

func TestDefaultConfigPath(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/xdg")
	if got := DefaultConfigPath(); got != "/xdg/capstan/capstan.yaml" {
		t.Errorf("with XDG_CONFIG_HOME: %s", got)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "/home/u")
	if got := DefaultConfigPath(); got != "/home/u/.config/capstan/capstan.yaml" {
		t.Errorf("without XDG_CONFIG_HOME: %s", got)
	}
}

func TestLocalHATemplate(t *testing.T) {
	tmpl, err := Builtin("local", "ha")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(tmpl, lookupFrom(map[string]string{"CLUSTER_NAME": "prod", "NAMESPACE": "default", "KUBERNETES_VERSION": "v1.35.8"}))
	if err != nil {
		t.Fatal(err)
	}
	var sawKCP, sawLC bool
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj struct {
			Kind string `json:"kind"`
			Spec struct {
				Replicas       int `json:"replicas"`
				FailureDomains []struct {
					Name         string `json:"name"`
					ControlPlane bool   `json:"controlPlane"`
				} `json:"failureDomains"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("rendered document does not parse: %v\n%s", err, doc)
		}
		switch obj.Kind {
		case "KubeadmControlPlane":
			sawKCP = true
			if obj.Spec.Replicas != 3 {
				t.Errorf("HA control plane has %d replicas by default, want 3", obj.Spec.Replicas)
			}
		case "LocalCluster":
			sawLC = true
			cp := 0
			for _, fd := range obj.Spec.FailureDomains {
				if fd.ControlPlane {
					cp++
				}
			}
			if cp < 3 {
				t.Errorf("HA LocalCluster has %d control-plane failure domains, want at least 3", cp)
			}
		}
	}
	if !sawKCP || !sawLC {
		t.Errorf("HA template lacks a KubeadmControlPlane or LocalCluster:\n%s", out)
	}
	if got := strings.Join(Flavors("local"), ","); got != "default,ha,topology" {
		t.Errorf("flavors %s", got)
	}
	if _, err := Builtin("local", "nope"); err == nil || !strings.Contains(err.Error(), "default, ha, topology") {
		t.Errorf("unknown flavor: %v", err)
	}
}

// FuzzRender: rendering either fails and returns nothing, or leaves no
// reference behind when every variable has a value without "${".
func FuzzRender(f *testing.F) {
	for _, seed := range []string{"a: ${A}", "${A:=x} ${B", "${A${B}}", "$${A}}", "${:=}", "x\n${A:=${B}}\n", "{{ x }}"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		out, err := Render(tmpl, func(string) (string, bool) { return "v", true })
		if err != nil {
			if out != "" {
				t.Fatalf("error %v with output %q", err, out)
			}
			return
		}
		if strings.Contains(out, "${") {
			t.Fatalf("rendered %q to %q, which still holds a reference", tmpl, out)
		}
	})
}
