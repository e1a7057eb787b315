package kubeadmconfig

import (
	"io/fs"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	"capstan.dev/capstan/internal/node/cloudinit"
)

func TestCloudConfigParsesBack(t *testing.T) {
	spec := &bootstrapv1.KubeadmConfigSpec{
		Files: []bootstrapv1.File{
			{Path: "/etc/hosts", Content: "127.0.0.1 {{ ds.meta_data.local_hostname }}\n", Append: ptr.To(true)},
			{Path: "/etc/motd", Content: "aGVsbG8K", Encoding: bootstrapv1.Base64, Permissions: "0600", Owner: "root:root"},
		},
		BootCommands:        []string{"echo boot"},
		PreKubeadmCommands:  []string{"swapoff -a", "echo 'quoted: yes'"},
		PostKubeadmCommands: []string{"echo done"},
		Users:               []bootstrapv1.User{{Name: "ops", Sudo: "ALL=(ALL) NOPASSWD:ALL", SSHAuthorizedKeys: []string{"ssh-ed25519 AAAA"}, LockPassword: ptr.To(false)}},
		NTP:                 bootstrapv1.NTP{Servers: []string{"time.example.com"}, Enabled: ptr.To(true)},
		Verbosity:           ptr.To[int32](5),
	}
	for _, join := range []bool{false, true} {
		bd := bootstrapData{
			spec:          spec,
			passwords:     map[int]string{0: "$6$hash"},
			kubeadmConfig: []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n"),
			join:          join,
		}
		for _, f := range spec.Files {
			bd.files = append(bd.files, userFile(f, f.Content))
		}
		if !join {
			bd.certFiles = []cloudFile{{Path: "/etc/kubernetes/pki/ca.key", Owner: "root:root", Permissions: "0600", Content: "KEY"}}
		}
		out, err := bd.render()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(out), "## template: jinja\n#cloud-config\n") {
			t.Fatalf("header:\n%s", out)
		}
		cfg, err := cloudinit.Parse(out)
		if err != nil {
			t.Fatalf("the node cannot parse it: %v\n%s", err, out)
		}
		if cfg.Template != "jinja" || len(cfg.Ignored) != 0 {
			t.Errorf("template %q ignored %v", cfg.Template, cfg.Ignored)
		}
		const sentinel = " && echo success > /run/cluster-api/bootstrap-success.complete"
		wantPath, wantCmd := InitConfigPath, "kubeadm init --config /run/kubeadm/kubeadm.yaml --v=5"+sentinel
		wantFiles := 5
		if join {
			wantPath, wantCmd = JoinConfigPath, "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml --v=5"+sentinel
			wantFiles = 4
		}
		if len(cfg.WriteFiles) != wantFiles {
			t.Fatalf("want %d files, have %+v", wantFiles, cfg.WriteFiles)
		}
		if f := cfg.WriteFiles[0]; f.Path != "/etc/hosts" || !f.Append || f.Mode != cloudinit.DefaultFileMode {
			t.Errorf("user file 0: %+v", f)
		}
		if f := cfg.WriteFiles[1]; f.Encoding != cloudinit.EncodingBase64 || f.Mode != fs.FileMode(0o600) || f.Owner != "root:root" {
			t.Errorf("user file 1: %+v", f)
		}
		if !join {
			if f := cfg.WriteFiles[2]; f.Path != "/etc/kubernetes/pki/ca.key" || f.Mode != 0o600 || f.Content != "KEY" {
				t.Errorf("certificate file: %+v", f)
			}
		}
		if dir := cfg.WriteFiles[len(cfg.WriteFiles)-1]; dir.Path != "/run/cluster-api/.keep" {
			t.Errorf("the sentinel's directory is not made: last file %+v", dir)
		}
		last := cfg.WriteFiles[len(cfg.WriteFiles)-2]
		if last.Path != wantPath || last.Mode != 0o600 || !strings.Contains(last.Content, "kind: JoinConfiguration") {
			t.Errorf("kubeadm file: %+v", last)
		}
		var run []string
		for _, c := range cfg.RunCmd {
			run = append(run, c.String())
		}
		if len(run) != 4 || run[0] != "swapoff -a" || run[1] != "echo 'quoted: yes'" || run[2] != wantCmd || run[3] != "echo done" {
			t.Errorf("runcmd %q", run)
		}
		if len(cfg.BootCmd) != 1 || cfg.BootCmd[0].String() != "echo boot" {
			t.Errorf("bootcmd %+v", cfg.BootCmd)
		}
		if len(cfg.Users) != 1 || cfg.Users[0].Name != "ops" || cfg.Users[0].LockPasswd || len(cfg.Users[0].SSHAuthorizedKeys) != 1 ||
			cfg.Users[0].Passwd+cfg.Users[0].HashedPasswd != "$6$hash" {
			t.Errorf("users %+v", cfg.Users)
		}
		if cfg.NTP == nil || !cfg.NTP.Enabled || len(cfg.NTP.Servers) != 1 {
			t.Errorf("ntp %+v", cfg.NTP)
		}
	}
}

func TestKubeadmCommandWithoutVerbosity(t *testing.T) {
	if got := kubeadmCommand(true, nil); got != "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml && echo success > /run/cluster-api/bootstrap-success.complete" {
		t.Error(got)
	}
}

// A partition's diskLayout reaches cloud-init as its layout list, with type
// names turned into cloud-init's codes and GUIDs passed through; a partition
// with only the layout flag keeps it.
func TestCloudConfigDiskLayout(t *testing.T) {
	spec := &bootstrapv1.KubeadmConfigSpec{DiskSetup: bootstrapv1.DiskSetup{Partitions: []bootstrapv1.Partition{
		{Device: "/dev/sdb", TableType: "gpt", DiskLayout: []bootstrapv1.PartitionSpec{
			{Percentage: 50, PartitionType: bootstrapv1.PartitionTypeLVM},
			{Percentage: 20, PartitionType: "0FC63DAF-8483-4772-8E79-3D69D8477DE4"},
			{Percentage: 30},
		}},
		{Device: "/dev/sdc", Layout: ptr.To(true)},
	}}}
	bd := bootstrapData{spec: spec, kubeadmConfig: []byte("kind: JoinConfiguration\n"), join: true}
	out, err := bd.render()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := cloudinit.Parse(out)
	if err != nil {
		t.Fatalf("the node cannot parse it: %v\n%s", err, out)
	}
	want := map[string]string{
		"/dev/sdb": `[[50,"8e"],[20,"0FC63DAF-8483-4772-8E79-3D69D8477DE4"],30]`,
		"/dev/sdc": "true",
	}
	if len(cfg.DiskSetup) != len(want) {
		t.Fatalf("disk_setup %+v, want %v", cfg.DiskSetup, want)
	}
	for _, d := range cfg.DiskSetup {
		if d.Layout != want[d.Device] {
			t.Errorf("%s: layout %s, want %s", d.Device, d.Layout, want[d.Device])
		}
	}
}
