"""The lab: a throwaway qemu VM with real OpenZFS, built from Debian packages and driven over ssh."""
