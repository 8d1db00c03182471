# dsh's files for the shell at the far end of its terminal (package inband,
# files.go): Session.WriteFile. Run by bash beside the shell, as its user:
# $1 is what to do, $2 the session's directory of files, $3 a file's name;
# data comes on stdin.
#
#   create DIR NAME  write stdin to DIR/NAME, replacing it; with DIR empty,
#                    make the directory first (0700, in $TMPDIR or /tmp)
#                    and print "dir PATH" (on a line of its own: a login
#                    shell's startup files may print before it)
#   append DIR NAME  add stdin to DIR/NAME, which must be there
#   remove DIR NAME  remove DIR/NAME if it is there
#   purge DIR        remove DIR and everything in it
#
# Exit status 3: DIR is not there, or not a directory of this user's (a
# command removed it; another user may have made one of that name since),
# 4: the file to append to is not there.
umask 077
dir=$2
case $1 in
purge)
	[[ -d $dir && ! -L $dir && -O $dir ]] || exit 0
	exec rm -rf -- "$dir"
	;;
create)
	if [[ -z $dir ]]; then
		dir=$(mktemp -d "${TMPDIR:-/tmp}/dsh-files.XXXXXXXXXX") || exit 2
		printf 'dir %s\n' "$dir"
	fi
	;;
esac
[[ -d $dir && ! -L $dir && -O $dir ]] || exit 3
case $1 in
create) exec cat >"$dir/$3" ;;
append)
	[[ -f $dir/$3 ]] || exit 4
	exec cat >>"$dir/$3"
	;;
remove) exec rm -f -- "$dir/$3" ;;
esac
echo "files.sh: unknown operation $1" >&2
exit 2
