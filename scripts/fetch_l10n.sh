#!/usr/bin/env bash
# Downloads the gettext catalogues of docs/DATA.md's package list with `apt-get download` (never
# installs anything) and extracts only their */LC_MESSAGES/*.mo files.
#
#   scripts/fetch_l10n.sh [L10N_DIR]     (default: <repo>/data/l10n, git-ignored)
#
# Layout: L10N_DIR/debs/*.deb, L10N_DIR/extracted/usr/share/locale/<locale>/LC_MESSAGES/*.mo,
# L10N_DIR/manifest.tsv (package, version, sha256 of the .deb, .mo files extracted).
# Idempotent: a .deb already present whose SHA-256 matches apt's index (or, when the index has
# no hash, the manifest) is not downloaded again, and an unchanged .deb is not extracted again.
# The text is GPL/LGPL and similar: it stays in the ignored folder and is never committed.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
l10n_dir="${1:-${repo_root}/data/l10n}"
debs_dir="${l10n_dir}/debs"
extract_dir="${l10n_dir}/extracted"
stamp_dir="${extract_dir}/.stamps"
manifest="${l10n_dir}/manifest.tsv"

# docs/DATA.md's 37 bookworm packages less iso-codes, libgweather-4-common and
# libkf5unitconversion-data (name lists of one or two words per entry, not sentences).
packages=(
  at-spi2-common cinnamon-l10n libgtk2.0-common gvfs-common kdeplasma-addons-data
  libokteta-l10n gnome-software-common audacity-data libc-l10n plasma-discover-common
  util-linux-locales vlc-l10n evolution-data-server-common e2fsprogs-l10n libglib2.0-data
  gcc-12-locales nautilus-data libgphoto2-l10n libavahi-common-data libkf5khtml-data
  libkf5kdelibs4support-data kdevelop-l10n libkf5calendarsupport-data hexchat-common
  libkf5textwidgets-data shared-mime-info libgnomekbd-common thunar-data pidgin-data gucharmap
  ktexteditor-data gnome-disk-utility binutils-common mate-calc-common
)

log() { echo "[fetch-l10n] $*"; }
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# "package<TAB>candidate version<TAB>SHA-256" for every package, from one apt-cache call;
# fails when apt's index lacks one of them.
index_lines() {
  apt-cache show --no-all-versions "${packages[@]}" 2>/dev/null |
    awk '/^Package:/ {p = $2} /^Version:/ {v = $2} /^SHA256:/ {print p "\t" v "\t" $2}'
}
# The SHA-256 recorded for a package in the previous manifest (empty when none).
manifest_sha256() {
  [[ -f "${manifest}" ]] || return 0
  awk -F'\t' -v p="$1" '$1 == p {print $3; exit}' "${manifest}"
}

updated=0
apt_update_once() {
  if [[ ${updated} -eq 0 ]]; then
    log "apt index incomplete or a download failed: running apt-get update once"
    apt-get update -qq
    updated=1
  fi
}

# Prints the path of an existing .deb of package $1 whose hash matches, or nothing.
existing_deb() {
  local pkg="$1" version="$2" expected="$3" deb
  for deb in "${debs_dir}/${pkg}_"*.deb; do
    [[ -f "${deb}" ]] || continue
    # apt-get download encodes ':' of an epoch as %3a.
    if [[ -n "${version}" && "$(basename "${deb}")" != "${pkg}_${version//:/%3a}_"* ]]; then
      continue
    fi
    if [[ -n "${expected}" && "$(sha256_of "${deb}")" == "${expected}" ]]; then
      echo "${deb}"
      return 0
    fi
  done
}

# As root, apt's download sandbox user (_apt) may not be able to write here; download as root.
apt_opts=(-qq)
[[ "$(id -u)" -ne 0 ]] || apt_opts+=(-o APT::Sandbox::User=root)
download() {
  local pkg="$1"
  if (cd "${debs_dir}" && apt-get download "${apt_opts[@]}" "${pkg}"); then return 0; fi
  apt_update_once
  (cd "${debs_dir}" && apt-get download "${apt_opts[@]}" "${pkg}")
}

mkdir -p "${debs_dir}" "${extract_dir}" "${stamp_dir}"
new_manifest="$(mktemp "${l10n_dir}/manifest.tsv.XXXXXX")"
trap 'rm -f "${new_manifest}"' EXIT
printf 'package\tversion\tsha256\tmo_files\n' >"${new_manifest}"

if ! index="$(index_lines)" || [[ "$(wc -l <<<"${index}")" -lt "${#packages[@]}" ]]; then
  apt_update_once
  index="$(index_lines || true)"
fi

downloaded=0
reused=0
for pkg in "${packages[@]}"; do
  version="$(awk -F'\t' -v p="${pkg}" '$1 == p {print $2; exit}' <<<"${index}")"
  apt_sha="$(awk -F'\t' -v p="${pkg}" '$1 == p {print $3; exit}' <<<"${index}")"
  # Without apt's hash, the previous manifest's says whether a present .deb is the one we had.
  deb="$(existing_deb "${pkg}" "${version}" "${apt_sha:-$(manifest_sha256 "${pkg}")}")"
  if [[ -n "${deb}" ]]; then
    reused=$((reused + 1))
  else
    download "${pkg}"
    downloaded=$((downloaded + 1))
    # The file apt-get download just wrote: the candidate version's name, else the newest.
    deb="$(compgen -G "${debs_dir}/${pkg}_${version//:/%3a}_*.deb" | head -n 1 || true)"
    [[ -n "${deb}" ]] || deb="$(find "${debs_dir}" -name "${pkg}_*.deb" -printf '%T@ %p\n' |
      sort -rn | head -n 1 | cut -d' ' -f2-)"
  fi
  sha="$(sha256_of "${deb}")"
  if [[ -n "${apt_sha}" && "${sha}" != "${apt_sha}" ]]; then
    echo "[fetch-l10n] ${deb}: sha256 ${sha} does not match apt's ${apt_sha}" >&2
    exit 1
  fi
  deb_version="$(dpkg-deb -f "${deb}" Version)"
  stamp="${stamp_dir}/${pkg}_${sha}"
  if [[ ! -f "${stamp}" ]]; then
    # Only catalogues: anything else in the package (binaries, maintainer scripts) stays out.
    members="$(dpkg-deb --fsys-tarfile "${deb}" | tar -t | grep -c '/LC_MESSAGES/[^/]*\.mo$' || true)"
    if [[ "${members}" -gt 0 ]]; then
      dpkg-deb --fsys-tarfile "${deb}" |
        tar -x --wildcards --no-same-owner -C "${extract_dir}" '*/LC_MESSAGES/*.mo'
    fi
    rm -f "${stamp_dir}/${pkg}_"*
    echo "${members}" >"${stamp}"
  fi
  printf '%s\t%s\t%s\t%s\n' "${pkg}" "${deb_version}" "${sha}" "$(cat "${stamp}")" \
    >>"${new_manifest}"
done

mv "${new_manifest}" "${manifest}"
trap - EXIT
mo_count="$(find "${extract_dir}" -path '*/LC_MESSAGES/*.mo' | wc -l)"
log "${#packages[@]} packages (${downloaded} downloaded, ${reused} already present)," \
  "${mo_count} catalogues under ${extract_dir}; manifest ${manifest}"
