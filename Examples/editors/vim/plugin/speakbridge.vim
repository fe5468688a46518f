" speakbridge.vim: dictation from `speakbridge serve --sink jsonl:PATH` appears at the cursor (Vim 8.2+, Vim 9).
"
" Install: copy plugin/speakbridge.vim into ~/.vim/plugin/ (Neovim: use ../nvim/lua/speakbridge.lua instead).
" Commands: :SpeakBridgeStart [PATH]   :SpeakBridgeStop   :SpeakBridgeStatus
" Default FIFO: $XDG_RUNTIME_DIR/speakbridge/dictation.fifo, in the daemon's own private runtime directory
" (g:speakbridge_fifo to change it). Without XDG_RUNTIME_DIR: the daemon's fallback, never /tmp.
"
" Flow: `cat` in a job reads the FIFO (Vim never blocks; the daemon's restarts do not end it, see s:Spawn)
" -> each line is parsed (a JSON object from the `jsonl:` sink, or plain text from the `fifo:` sink)
" -> a framed line whose seq is not above the last one taken for its (device, session) is dropped (the daemon
" repeats at most one line after a crash) -> the chunk joins a queue -> the queue is inserted at the cursor, one
" chunk at a time.
" An insert that fails (buffer not modifiable, any error) keeps the chunk at the head of the queue: it is retried
" every half second and on the next chunk, and nothing is lost.
"
" Where a chunk goes (the current window, in every mode): in Insert and Replace mode at the cursor; in the other
" modes before the character under the cursor (as `i` would put it), or after it when it is the last character of a
" non-empty line. The cursor ends right after the chunk, so the next chunk follows it. One space separates the chunk
" from the text before and after it where both sides are words: none at the start of a line, after a space or an
" opening bracket, before a space or the end of the line, and never before punctuation (`.`, `,`, `?`...). A line
" break inside a chunk becomes a space; no line break is ever added.
if exists('g:loaded_speakbridge') || !has('job') || !has('timers')
  finish
endif
let g:loaded_speakbridge = 1
let s:save_cpo = &cpo
set cpo&vim

" State kept for the whole editor session, across FIFO reopens and :SpeakBridgeStop/Start.
let s:job = v:null
let s:fifo = ''
let s:stopping = 0
let s:warned = 0
let s:taken = {}        " "device\nsession" -> highest seq queued or inserted
let s:queue = []        " texts read but not inserted yet, oldest first
let s:inserted = 0
let s:dropped = 0
let s:last_error = ''
let s:timer = -1
let s:closing = split('. , ; : ! ? ) ] } % … » › ” ’ 。 ， 、 ！ ？ ： ； ） 」 』')
let s:opening = split('( [ { “ ‘ « ‹ ¿ ¡ （ 「 『')

" The daemon's runtime directory, by the daemon's rule: $XDG_RUNTIME_DIR/speakbridge; else /run/user/UID/speakbridge
" if /run/user/UID is a private directory; else $XDG_STATE_HOME/speakbridge/run. Never a name in /tmp, where
" another user could create the FIFO first and read the dictation.
function! s:RuntimeDir() abort
  if $XDG_RUNTIME_DIR =~# '^/'
    return $XDG_RUNTIME_DIR . '/speakbridge'
  endif
  let l:run = '/run/user/' . trim(system('id -u'))
  if getftype(l:run) ==# 'dir' && getfperm(l:run) ==# 'rwx------'
    return l:run . '/speakbridge'
  endif
  return ($XDG_STATE_HOME =~# '^/' ? $XDG_STATE_HOME : expand('~/.local/state')) . '/speakbridge/run'
endfunction

function! s:DefaultFifo() abort
  return get(g:, 'speakbridge_fifo', s:RuntimeDir() . '/dictation.fifo')
endfunction

" Whether a space belongs between the characters a:left and a:right ('' = line start or end).
function! s:NeedsSpace(left, right) abort
  if a:left ==# '' || a:right ==# '' || a:left =~# '^\s$' || a:right =~# '^\s$'
    return 0
  endif
  return index(s:opening, a:left) < 0 && index(s:closing, a:right) < 0
endfunction

" Inserts one text in the current window as described at the top; throws when it cannot.
function! s:InsertText(text) abort
  let l:text = substitute(a:text, '\r\=\n', ' ', 'g')
  if l:text ==# ''
    return
  endif
  if !&modifiable
    throw 'buffer ' . bufnr('%') . ' is not modifiable'
  endif
  let l:lnum = line('.')
  let l:line = getline(l:lnum)
  let l:at = min([col('.') - 1, len(l:line)])
  if mode() !~# '^[iR]' && l:line !=# ''
    if l:at + len(matchstr(l:line[l:at :], '^.')) >= len(l:line)
      let l:at = len(l:line)   " on the last character: after it
    endif
  endif
  let l:before = strpart(l:line, 0, l:at)
  let l:after = strpart(l:line, l:at)
  let l:lead = s:NeedsSpace(matchstr(l:before, '.$'), matchstr(l:text, '^.')) ? ' ' : ''
  let l:trail = s:NeedsSpace(matchstr(l:text, '.$'), matchstr(l:after, '^.')) ? ' ' : ''
  call setline(l:lnum, l:before . l:lead . l:text . l:trail . l:after)
  call cursor(l:lnum, l:at + len(l:lead) + len(l:text) + 1)
endfunction

" Inserts the queue in order; stops at the first failure and keeps that chunk (and the rest) for a retry.
function! s:Drain(...) abort
  while !empty(s:queue)
    try
      call s:InsertText(s:queue[0])
    catch
      if v:exception !=# s:last_error
        let s:last_error = v:exception
        echohl WarningMsg
        echomsg 'speakbridge: ' . len(s:queue) . ' chunk(s) held, not inserted: ' . v:exception . ' (retrying)'
        echohl None
      endif
      if s:timer < 0
        let s:timer = timer_start(500, function('s:Drain'), {'repeat': -1})
      endif
      return
    endtry
    call remove(s:queue, 0)
    let s:inserted += 1
  endwhile
  if s:last_error !=# ''
    let s:last_error = ''
    echomsg 'speakbridge: held chunks inserted'
  endif
  if s:timer >= 0
    call timer_stop(s:timer)
    let s:timer = -1
  endif
  redraw
endfunction

" A frame from the `jsonl:` sink, or {}: an object with string device, session, text and an integer seq.
function! s:Frame(text) abort
  try
    let l:obj = json_decode(a:text)
  catch
    return {}
  endtry
  if type(l:obj) != v:t_dict || type(get(l:obj, 'device')) != v:t_string
        \ || type(get(l:obj, 'session')) != v:t_string || type(get(l:obj, 'text')) != v:t_string
        \ || type(get(l:obj, 'seq')) != v:t_number || l:obj.seq < 0
    return {}
  endif
  return l:obj
endfunction

" One line from the FIFO: queue it unless it is a framed chunk already taken.
function! s:Take(line) abort
  let l:obj = a:line[0] ==# '{' ? s:Frame(a:line) : {}
  if empty(l:obj)
    " A line torn by a writer killed mid-line (longer than the atomic 4096 bytes) is followed by the whole object;
    " the torn part is repeated after the restart, so only the last object in the line counts.
    let l:start = strridx(a:line, '{"device":')
    let l:obj = l:start > 0 ? s:Frame(a:line[l:start :]) : {}
  endif
  if !empty(l:obj)
    let l:key = l:obj.device . "\n" . l:obj.session
    if has_key(s:taken, l:key) && l:obj.seq <= s:taken[l:key]
      let s:dropped += 1
      return
    endif
    let s:taken[l:key] = l:obj.seq
    call add(s:queue, l:obj.text)
  elseif a:line !=# ''
    call add(s:queue, a:line)   " the plain `fifo:` sink: the line is the text
  endif
endfunction

function! s:OnLine(channel, line) abort
  try
    call s:Take(a:line)
  catch
    call add(s:queue, a:line)   " never lose a line to a bug in parsing: insert it as it is
  endtry
  call s:Drain()
endfunction

" The reader: `cat` on the FIFO opened read-write (`<>`), so the open never waits for the daemon and the daemon's
" restarts are no end of file. `exec`: the job is cat itself, which Vim stops when it exits. It starts only on a
" FIFO of ours that nobody else may open (the daemon's rule); otherwise, or when cat ends, again a second later.
function! s:Spawn(...) abort
  if s:stopping
    return
  endif
  if getftype(s:fifo) !=# 'fifo' || getfperm(s:fifo)[3:] !=# '------'
    if !s:warned
      let s:warned = 1
      echohl WarningMsg
      echomsg 'speakbridge: ' . s:fifo . ' is not a private FIFO yet; start `speakbridge serve --sink jsonl:'
            \ . s:fifo . '` (waiting for it)'
      echohl None
    endif
    call timer_start(1000, function('s:Spawn'))
    return
  endif
  let s:warned = 0
  let s:job = job_start(['sh', '-c', '[ -p "$1" ] && [ -O "$1" ] || exit 3; exec cat <>"$1"', 'sh', s:fifo],
        \ {'out_cb': function('s:OnLine'), 'out_mode': 'nl', 'in_io': 'null', 'err_io': 'null',
        \  'exit_cb': function('s:OnExit')})
endfunction

function! s:OnExit(job, status) abort
  if a:job is s:job
    let s:job = v:null
    if !s:stopping
      call timer_start(1000, function('s:Spawn'))
    endif
  endif
endfunction

function! s:Start(path) abort
  if s:job isnot v:null && job_status(s:job) ==# 'run'
    echo 'speakbridge: already reading ' . s:fifo
    return
  endif
  let s:fifo = empty(a:path) ? s:DefaultFifo() : expand(a:path)
  let s:stopping = 0
  let s:warned = 0
  call s:Spawn()
endfunction

function! s:Stop() abort
  let s:stopping = 1
  if s:job isnot v:null
    call job_stop(s:job)
    let s:job = v:null
  endif
endfunction

" What the plugin holds and has done (for :SpeakBridgeStatus and scripts).
function! SpeakBridgeStatus() abort
  return {'reading': s:job isnot v:null && job_status(s:job) ==# 'run', 'held': len(s:queue),
        \ 'inserted': s:inserted, 'dropped': s:dropped, 'error': s:last_error}
endfunction

command! -nargs=? -complete=file SpeakBridgeStart call s:Start(<q-args>)
command! SpeakBridgeStop call s:Stop()
command! SpeakBridgeStatus echo SpeakBridgeStatus()

let &cpo = s:save_cpo
unlet s:save_cpo
