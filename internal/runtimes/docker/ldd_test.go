package docker

import (
	"reflect"
	"strings"
	"testing"
)

// Rows are ldd outputs as glibc's ldd script (elf/ldd.bash.in) and musl print them.
func TestParseLdd(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    Linkage
		wantErr string
	}{
		{
			name: "cgo binary linking libzmq (glibc 2.36, Debian 12)",
			out: "\tlinux-vdso.so.1 (0x00007ffd1a5f3000)\n" +
				"\tlibzmq.so.5 => /lib/x86_64-linux-gnu/libzmq.so.5 (0x00007f48cb6ed000)\n" +
				"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f48cb50b000)\n" +
				"\t/lib64/ld-linux-x86-64.so.2 (0x00007f48cb7bd000)\n" +
				"\tlibsodium.so.23 => /lib/x86_64-linux-gnu/libsodium.so.23 (0x00007f48cb49c000)\n",
			want: Linkage{Loader: "/lib64/ld-linux-x86-64.so.2", Libs: []string{
				"/lib/x86_64-linux-gnu/libzmq.so.5", "/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libsodium.so.23"}},
		},
		{
			name: "static Go binary (glibc ldd prints this and exits 1)",
			out:  "\tnot a dynamic executable\n",
			want: Linkage{Static: true},
		},
		{
			name: "static binary as musl and newer tools say it",
			out:  "\tstatically linked\n",
			want: Linkage{Static: true},
		},
		{
			name: "old glibc vDSO with an empty mapping, and a library listed twice",
			out: "\tlinux-gate.so.1 =>  (0xb7f1b000)\n" +
				"\tlibm.so.6 => /lib/libm.so.6 (0xb7ee0000)\n" +
				"\tlibm.so.6 => /lib/libm.so.6 (0xb7ee0000)\n" +
				"\t/lib/ld-linux.so.2 (0xb7f1c000)\n",
			want: Linkage{Loader: "/lib/ld-linux.so.2", Libs: []string{"/lib/libm.so.6"}},
		},
		{
			name: "the loader also listed as a library is copied once",
			out: "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n" +
				"\tld-linux-x86-64.so.2 => /lib64/ld-linux-x86-64.so.2 (0x2)\n" +
				"\t/lib64/ld-linux-x86-64.so.2 (0x2)\n",
			want: Linkage{Loader: "/lib64/ld-linux-x86-64.so.2", Libs: []string{"/lib/x86_64-linux-gnu/libc.so.6"}},
		},
		{
			name:    "a library ldd cannot find",
			out:     "\tlibzmq.so.5 => not found\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n\t/lib64/ld-linux-x86-64.so.2 (0x2)\n",
			wantErr: "libraries not found: libzmq.so.5",
		},
		{
			name:    "ldd's own error (a file that is not ELF)",
			out:     "ldd: ./Makefile: not regular file\n",
			wantErr: "neither a library mapping nor the loader",
		},
		{
			name:    "empty output",
			out:     "",
			wantErr: "no loader, no libraries",
		},
		{
			name:    "a relative library path",
			out:     "\tlibx.so => libx.so (0x1)\n",
			wantErr: "relative path",
		},
		{
			name:    "two different loaders",
			out:     "\t/lib64/ld-linux-x86-64.so.2 (0x1)\n\t/lib/ld-musl-x86_64.so.1 (0x2)\n",
			wantErr: "a second loader",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLdd(tt.out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseLdd() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseLdd() error = %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseLdd() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLinkageFilesPutsTheLoaderFirst(t *testing.T) {
	l := Linkage{Loader: "/lib64/ld.so", Libs: []string{"/lib/a.so", "/lib/b.so"}}
	if got, want := l.Files(), []string{"/lib64/ld.so", "/lib/a.so", "/lib/b.so"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Files() = %v, want %v", got, want)
	}
	if got := (Linkage{Static: true}).Files(); len(got) != 0 {
		t.Fatalf("Files() of a static binary = %v, want none", got)
	}
}
