" speakbridge.vim: text dictated into `speakbridge serve --sink fifo:PATH` appears at the cursor (Vim 8.2+).
"
" Install: copy plugin/speakbridge.vim into ~/.vim/plugin/ (Neovim: use ../nvim/lua/speakbridge.lua instead).
" Commands: :SpeakBridgeStart [PATH]   :SpeakBridgeStop
" Default FIFO: $XDG_RUNTIME_DIR/speakbridge/dictation.fifo, in the daemon's own private runtime directory
" (g:speakbridge_fifo to change it). Without XDG_RUNTIME_DIR: the daemon's fallback, never /tmp.
"
" Each line the daemon writes (one chunk) is inserted after the cursor of the current window, followed by a space.
" The FIFO is read by `cat` in a job, so Vim never blocks; the job loops when the daemon closes its end.
if exists('g:loaded_speakbridge') || !has('job')
  finish
endif
let g:loaded_speakbridge = 1

let s:job = v:null

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

function! s:Insert(channel, line) abort
  if a:line ==# '' || !&modifiable
    return
  endif
  let l:text = a:line . get(g:, 'speakbridge_separator', ' ')
  let [l:lnum, l:col] = [line('.'), col('.')]
  let l:current = getline(l:lnum)
  " After the character under the cursor (like `a`), or at column 1 on an empty line.
  let l:at = empty(l:current) ? 0 : l:col + len(matchstr(l:current[l:col - 1 :], '^.')) - 1
  call setline(l:lnum, strpart(l:current, 0, l:at) . l:text . strpart(l:current, l:at))
  call cursor(l:lnum, l:at + len(l:text))
  redraw
endfunction

function! s:Start(path) abort
  if s:job isnot v:null && job_status(s:job) ==# 'run'
    echo 'speakbridge: already reading'
    return
  endif
  let l:fifo = empty(a:path) ? s:DefaultFifo() : expand(a:path)
  if getftype(l:fifo) !=# 'fifo'
    echohl WarningMsg
    echo 'speakbridge: ' . l:fifo . ' is not a FIFO yet; start `speakbridge serve --sink fifo:' . l:fifo . '`'
    echohl None
  endif
  let s:job = job_start(['sh', '-c', 'while :; do cat -- "$1" 2>/dev/null || sleep 1; done', 'sh', l:fifo],
        \ {'out_cb': function('s:Insert'), 'out_mode': 'nl'})
endfunction

function! s:Stop() abort
  if s:job isnot v:null
    call job_stop(s:job)
    let s:job = v:null
  endif
endfunction

command! -nargs=? -complete=file SpeakBridgeStart call s:Start(<q-args>)
command! SpeakBridgeStop call s:Stop()
