# dsh's stdin proof at the far end of a shell's terminal (package inband,
# remoteprobe.go). Run by bash beside the shell, with the shell's pid as $1:
# for each line it reads it answers one line about the terminal's
# foreground, from /proc, with builtins only (no process is started):
#
#   x            the shell is gone, or this is not the shell it started with
#   n            nothing is proven to wait for input
#   y            a job in the foreground is blocked reading the terminal
#   s FD BUF N   the shell itself is in the foreground, blocked in
#                read(FD, BUF, N) on the terminal: its prompt, or a read
#                builtin (the caller tells them apart)
#   v            where the shell's syscall file is closed to us: the
#                shell itself is in the foreground, asleep where a
#                terminal read sleeps, in a read it began since the last
#                question
#   w            as v, in the same read as at the last question, which
#                answered v or w
#
# At the start it answers once: "r" when it can serve, or "x REASON".
#
# A thread counts as reading the terminal when its syscall file shows it
# blocked in read or readv on a descriptor open on the terminal (or on
# /dev/tty, the terminal being its controlling one), or in select or poll
# on some descriptor while its process has nothing open that could keep
# it waiting but the terminal (no pipe, socket or event descriptor: files
# and directories are always ready). Where the syscall file
# is closed to this process (Yama's ptrace_scope 1 allows it to ancestors
# only) a job's thread counts when it sleeps where the kernel's terminal
# read sleeps (wait_woken, n_tty_read) and nothing else it has open could
# put it there: only the terminal, files, directories, pipes and the
# harmless character devices. The shell's own read is judged by its
# syscall file; where that is closed to us, by the same sleep, and by its
# count of characters read (/proc/PID/io), which says whether it is still
# in the read it was in at the last question: the caller asks again only
# after it has our last answer, so a read that lasted from one question to
# the next began before that answer was sent, and at its prompt the shell
# prints its prompt's marker before it reads, which the terminal has
# carried to the caller before our next answer. Relays (ssh, docker exec
# -it) poll, and never count.
builtin set +o history 2>/dev/null
P=$1 WCHAN_ONLY=${2-} SHELL_READ=
IFS=$' \t\n'

# get FILE: L gets the first line of FILE (which need not end in a
# newline); false when it cannot be read.
get() {
	L=
	IFS= builtin read -r L <"$1" || [[ -n $L ]]
}

# stat_of PID: F gets the fields of /proc/PID/stat after the comm: F[0] is
# the state, then ppid, pgrp, session, tty_nr, tpgid; F[17] the threads,
# F[19] the start time.
stat_of() {
	get "/proc/$1/stat" || builtin return 1
	L=${L##*) }
	F=($L)
	[[ ${#F[@]} -ge 20 ]]
}

stat_of "$P" 2>/dev/null || { builtin echo "x no /proc/$P/stat"; builtin exit 1; }
START=${F[19]} TTY=${F[4]} DEV=
for d in /dev/pts/[0-9]*; do
	if [[ $d -ef /proc/$P/fd/0 ]]; then DEV=$d; builtin break; fi
done
[[ -n $DEV ]] || { builtin echo "x the shell's stdin is no pty of /dev/pts"; builtin exit 1; }
# The system calls a program waits for input in: read and readv; select
# and pselect6; poll and ppoll.
case $HOSTTYPE in
x86_64) READS=' 0 19 ' SELECTS=' 23 270 ' POLLS=' 7 271 ' ;;
aarch64 | arm64) READS=' 63 65 ' SELECTS=' 72 ' POLLS=' 73 ' ;;
*) READS= SELECTS= POLLS= ;;
esac

# on_tty PID FD CTTY: descriptor FD of PID is open on the terminal.
on_tty() {
	[[ /proc/$1/fd/$2 -ef $DEV ]] || { [[ /proc/$1/fd/$2 -ef /dev/tty ]] && ((${3} == TTY)); }
}

# reads_tty PID TID CTTY: how the thread waits, by its syscall file.
# 0: blocked in read or readv on the terminal; 3: in select or poll on at
# least one descriptor (which, only its memory would say); 1: neither;
# 2: the file is closed to us.
reads_tty() {
	local l c
	[[ -z $WCHAN_ONLY ]] && get "/proc/$1/task/$2/syscall" || builtin return 2
	l=$L c=($L)
	[[ ${#c[@]} -eq 9 ]] || builtin return 1
	if [[ $SELECTS == *" ${c[0]} "* ]]; then
		# nfds, and a read set.
		((c[1] >= 1 && c[2] != 0)) || builtin return 1
		builtin return 3
	elif [[ $POLLS == *" ${c[0]} "* ]]; then
		((c[2] >= 1)) || builtin return 1
		builtin return 3
	fi
	[[ $READS == *" ${c[0]} "* ]] || builtin return 1
	on_tty "$1" $((c[1])) "$3" || builtin return 1
	# It did not wake up meanwhile.
	get "/proc/$1/task/$2/syscall" && [[ $L == "$l" ]]
}

# quiet_fds PID CTTY [strict]: everything PID has open is the terminal or
# cannot make a thread sleep where a terminal read does (strict: nor make
# select or poll wait: no pipes either), and the terminal is among it.
quiet_fds() {
	local f tty=
	for f in /proc/$1/fd/*; do
		if [[ $f -ef $DEV ]]; then
			tty=1
		elif [[ $f -ef /dev/tty ]]; then
			(($2 == TTY)) || builtin return 1
			tty=1
		elif [[ -f $f || -d $f || -b $f ]]; then
			# bash's -f also holds for a file of no type: every anonymous
			# descriptor (a signalfd, which a pager such as more polls
			# beside the terminal, but an eventfd or a timerfd too).
			:
		elif [[ -p $f ]]; then
			[[ -z ${3-} ]] || builtin return 1
		elif [[ $f -ef /dev/null || $f -ef /dev/zero || $f -ef /dev/full || $f -ef /dev/random || $f -ef /dev/urandom ]]; then
			:
		else
			builtin return 1
		fi
	done
	[[ -n $tty ]]
}

# waits PID PGID: PID is in group PGID and one of its threads is blocked
# reading the terminal: in read on it; or in select or poll with nothing
# else open that could keep it waiting (a pipe, a socket, an event
# descriptor), the waits of a REPL or an editor; or, where the syscall file
# is closed to us, asleep where a terminal read sleeps with nothing else
# open that could put it there.
waits() {
	local t ctty sleeping= polling=
	stat_of "$1" && ((F[2] == $2)) || builtin return 1
	ctty=${F[4]}
	for t in /proc/$1/task/*; do
		t=${t##*/}
		reads_tty "$1" "$t" "$ctty"
		case $? in
		0) builtin return 0 ;;
		3) polling=1 ;;
		2)
			get "/proc/$1/task/$t/wchan"
			[[ $L != wait_woken && $L != n_tty_read ]] || sleeping=1
			;;
		esac
	done
	if [[ -n $polling ]] && quiet_fds "$1" "$ctty" strict; then
		builtin return 0
	fi
	[[ -n $sleeping ]] && quiet_fds "$1" "$ctty"
}

# shell_sleeps answers for the shell itself where its syscall file is
# closed to us: v or w when it sleeps where a terminal read sleeps with
# nothing else open that could put it there (SHELL_READ keeps its count of
# characters read, to tell the same read at the next question), else n.
shell_sleeps() {
	local was=$SHELL_READ
	SHELL_READ=
	get "/proc/$P/wchan" && [[ $L == wait_woken || $L == n_tty_read ]] || { builtin echo n; builtin return; }
	quiet_fds "$P" "$TTY" && get "/proc/$P/io" && [[ $L == rchar:* ]] || { builtin echo n; builtin return; }
	SHELL_READ=$L
	# It did not wake up meanwhile.
	get "/proc/$P/wchan" && [[ $L == wait_woken || $L == n_tty_read ]] || {
		SHELL_READ=
		builtin echo n
		builtin return
	}
	if [[ $was == "$SHELL_READ" ]]; then
		builtin echo w
	else
		builtin echo v
	fi
}

# probe answers one request.
probe() {
	local fg c q kids seen=0
	stat_of "$P" && [[ ${F[19]} == "$START" ]] || { builtin echo x; builtin return; }
	fg=${F[5]}
	if ((fg == P)); then
		if [[ -n $WCHAN_ONLY ]] || ! get "/proc/$P/syscall"; then
			shell_sleeps
			builtin return
		fi
		c=($L)
		if [[ ${#c[@]} -eq 9 && $READS == *" ${c[0]} "* ]] && on_tty "$P" $((c[1])) "$TTY"; then
			builtin echo "s $((c[1])) $((c[2])) $((c[3]))"
		else
			builtin echo n
		fi
		builtin return
	fi
	SHELL_READ=
	if ((fg <= 0)); then
		builtin echo n
	elif waits "$fg" "$fg"; then
		builtin echo y
	else
		# The group's other members: the shell's descendants, breadth
		# first, at most 256 of them.
		get "/proc/$P/task/$P/children"
		kids=($L)
		while ((${#kids[@]} > 0 && seen < 256)); do
			q=${kids[0]}
			kids=("${kids[@]:1}")
			seen=$((seen + 1))
			if ((q != fg)) && waits "$q" "$fg"; then
				builtin echo y
				builtin return
			fi
			get "/proc/$q/task/$q/children"
			kids+=($L)
		done
		builtin echo n
	fi
}

builtin echo r
while IFS= builtin read -r _; do
	probe 2>/dev/null
done
