package kubeadmconfig

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	"capstan.dev/capstan/internal/node/cloudinit"
)

// Paths of the kubeadm configuration files on the machine, and the kubeadm
// commands that read them (docs/local-provider.md).
const (
	InitConfigPath = "/run/kubeadm/kubeadm.yaml"
	JoinConfigPath = "/run/kubeadm/kubeadm-join-config.yaml"
)

// cloudFile is one write_files entry, with its content resolved.
type cloudFile struct {
	Path        string `json:"path"`
	Owner       string `json:"owner,omitempty"`
	Permissions string `json:"permissions,omitempty"`
	Encoding    string `json:"encoding,omitempty"`
	Append      bool   `json:"append,omitempty"`
	Content     string `json:"content"`
}

// cloudUser is one cloud-init users entry, with the password resolved.
type cloudUser struct {
	Name              string   `json:"name"`
	Gecos             string   `json:"gecos,omitempty"`
	Groups            string   `json:"groups,omitempty"`
	HomeDir           string   `json:"homedir,omitempty"`
	Inactive          *bool    `json:"inactive,omitempty"`
	Shell             string   `json:"shell,omitempty"`
	Passwd            string   `json:"passwd,omitempty"`
	PrimaryGroup      string   `json:"primary_group,omitempty"`
	LockPasswd        *bool    `json:"lock_passwd,omitempty"`
	Sudo              string   `json:"sudo,omitempty"`
	SSHAuthorizedKeys []string `json:"ssh_authorized_keys,omitempty"`
}

type cloudNTP struct {
	Enabled *bool    `json:"enabled,omitempty"`
	Servers []string `json:"servers,omitempty"`
}

// cloudDisk is one disk_setup entry. Layout is true or false (one partition
// over the whole device, or none) or a list of partitions, each a percentage
// or a [percentage, type code] pair.
type cloudDisk struct {
	TableType string `json:"table_type,omitempty"`
	Layout    any    `json:"layout"`
	Overwrite *bool  `json:"overwrite,omitempty"`
}

// partitionTypeCodes are the cloud-init codes of the partition type names a
// diskLayout may use; any other value (a GPT type GUID) is passed as it is.
var partitionTypeCodes = map[string]string{
	bootstrapv1.PartitionTypeLinux:         "83",
	bootstrapv1.PartitionTypeLinuxSwap:     "82",
	bootstrapv1.PartitionTypeLinuxRAID:     "fd",
	bootstrapv1.PartitionTypeLVM:           "8e",
	bootstrapv1.PartitionTypeFat32:         "0c",
	bootstrapv1.PartitionTypeNTFS:          "07",
	bootstrapv1.PartitionTypeLinuxExtended: "85",
}

// diskLayout is a partition's cloud-init layout: the list of its diskLayout
// when it has one, else its layout flag.
func diskLayout(p bootstrapv1.Partition) any {
	if len(p.DiskLayout) == 0 {
		return ptr.Deref(p.Layout, false)
	}
	parts := make([]any, 0, len(p.DiskLayout))
	for _, d := range p.DiskLayout {
		if d.PartitionType == "" {
			parts = append(parts, d.Percentage)
			continue
		}
		code, named := partitionTypeCodes[d.PartitionType]
		if !named {
			code = d.PartitionType
		}
		parts = append(parts, []any{d.Percentage, code})
	}
	return parts
}

type cloudFS struct {
	Label      string   `json:"label,omitempty"`
	Filesystem string   `json:"filesystem"`
	Device     string   `json:"device"`
	Partition  string   `json:"partition,omitempty"`
	Overwrite  *bool    `json:"overwrite,omitempty"`
	ReplaceFS  string   `json:"replace_fs,omitempty"`
	ExtraOpts  []string `json:"extra_opts,omitempty"`
}

// cloudConfig is the document, in the key order cloud-init users expect to
// read (sigs.k8s.io/yaml sorts keys; the order does not matter to cloud-init).
type cloudConfig struct {
	WriteFiles []cloudFile               `json:"write_files,omitempty"`
	BootCmd    []string                  `json:"bootcmd,omitempty"`
	RunCmd     []string                  `json:"runcmd,omitempty"`
	Users      []cloudUser               `json:"users,omitempty"`
	NTP        *cloudNTP                 `json:"ntp,omitempty"`
	DiskSetup  map[string]cloudDisk      `json:"disk_setup,omitempty"`
	FSSetup    []cloudFS                 `json:"fs_setup,omitempty"`
	Mounts     []bootstrapv1.MountPoints `json:"mounts,omitempty"`
}

// bootstrapData is what one machine's cloud-config is made of, secrets
// already read.
type bootstrapData struct {
	spec *bootstrapv1.KubeadmConfigSpec
	// files are the user's files (contentFrom resolved), in spec order.
	files []cloudFile
	// certFiles are the cluster certificates (init and control-plane join only).
	certFiles []cloudFile
	// passwords holds each user's resolved password hash, by index.
	passwords map[int]string
	// kubeadmConfig is the rendered kubeadm file; join selects its path and command.
	kubeadmConfig []byte
	join          bool
}

// kubeadmCommand is the runcmd entry that runs kubeadm and, only when it
// succeeds, writes the bootstrap contract's sentinel file: infrastructure
// providers read that file to tell a finished bootstrap from a failed one,
// since cloud-init itself carries on past a failed runcmd entry.
func kubeadmCommand(join bool, verbosity *int32) string {
	cmd := "kubeadm init --config " + InitConfigPath
	if join {
		cmd = "kubeadm join --config " + JoinConfigPath
	}
	if verbosity != nil {
		cmd += " --v=" + strconv.Itoa(int(*verbosity))
	}
	return cmd + " && echo success > " + cloudinit.SentinelPath
}

// sentinelDirFile creates the sentinel's directory through write_files, so
// that the runcmd entry needs no mkdir of its own (a mkdir -p would not work
// on every operating system cloud-init or its kin run on).
var sentinelDirFile = cloudFile{
	Path: path.Dir(cloudinit.SentinelPath) + "/.keep", Owner: "root:root", Permissions: "0640",
	Content: "Kept so that this directory exists before the bootstrap writes its sentinel file here.\n",
}

// render writes the cloud-config document: "## template: jinja" (so that
// instance-data variables in the user's files and the kubeadm file are
// expanded, as with Cluster API's provider), "#cloud-config", then YAML.
func (d bootstrapData) render() ([]byte, error) {
	spec := d.spec
	configPath := InitConfigPath
	if d.join {
		configPath = JoinConfigPath
	}
	cfg := cloudConfig{}
	cfg.WriteFiles = append(cfg.WriteFiles, d.files...)
	cfg.WriteFiles = append(cfg.WriteFiles, d.certFiles...)
	// 0600, where Cluster API's provider writes 0640: a join configuration
	// holds the bootstrap token, and kubeadm runs as root, which needs no
	// group to read it.
	cfg.WriteFiles = append(cfg.WriteFiles, cloudFile{Path: configPath, Owner: "root:root", Permissions: "0600", Content: string(d.kubeadmConfig)})
	cfg.WriteFiles = append(cfg.WriteFiles, sentinelDirFile)
	cfg.BootCmd = spec.BootCommands
	cfg.RunCmd = append(cfg.RunCmd, spec.PreKubeadmCommands...)
	cfg.RunCmd = append(cfg.RunCmd, kubeadmCommand(d.join, spec.Verbosity))
	cfg.RunCmd = append(cfg.RunCmd, spec.PostKubeadmCommands...)
	for i, u := range spec.Users {
		cfg.Users = append(cfg.Users, cloudUser{
			Name: u.Name, Gecos: u.Gecos, Groups: u.Groups, HomeDir: u.HomeDir, Inactive: u.Inactive,
			Shell: u.Shell, Passwd: d.passwords[i], PrimaryGroup: u.PrimaryGroup, LockPasswd: u.LockPassword,
			Sudo: u.Sudo, SSHAuthorizedKeys: u.SSHAuthorizedKeys,
		})
	}
	if spec.NTP.IsDefined() {
		cfg.NTP = &cloudNTP{Enabled: spec.NTP.Enabled, Servers: spec.NTP.Servers}
	}
	for _, p := range spec.DiskSetup.Partitions {
		if cfg.DiskSetup == nil {
			cfg.DiskSetup = map[string]cloudDisk{}
		}
		cfg.DiskSetup[p.Device] = cloudDisk{TableType: p.TableType, Layout: diskLayout(p), Overwrite: p.Overwrite}
	}
	for _, f := range spec.DiskSetup.Filesystems {
		cfg.FSSetup = append(cfg.FSSetup, cloudFS{
			Label: f.Label, Filesystem: f.Filesystem, Device: f.Device, Partition: f.Partition,
			Overwrite: f.Overwrite, ReplaceFS: f.ReplaceFS, ExtraOpts: f.ExtraOpts,
		})
	}
	cfg.Mounts = spec.Mounts
	body, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("rendering cloud-config: %w", err)
	}
	var b strings.Builder
	b.WriteString("## template: jinja\n#cloud-config\n")
	b.Write(body)
	return []byte(b.String()), nil
}

// userFile converts a spec file whose content is known.
func userFile(f bootstrapv1.File, content string) cloudFile {
	return cloudFile{
		Path: f.Path, Owner: f.Owner, Permissions: f.Permissions, Encoding: string(f.Encoding),
		Append: ptr.Deref(f.Append, false), Content: content,
	}
}
