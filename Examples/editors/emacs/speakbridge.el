;;; speakbridge.el --- dictation from SpeakBridge's jsonl sink at point  -*- lexical-binding: t; -*-

;; Usage: (load "/path/to/Examples/editors/emacs/speakbridge.el")
;;        M-x speakbridge-start   (reads `speakbridge-fifo', default $XDG_RUNTIME_DIR/speakbridge/dictation.fifo)
;;        M-x speakbridge-stop    M-x speakbridge-status
;; The daemon runs with `speakbridge serve --sink jsonl:PATH' (the plain `fifo:PATH' sink works too).
;; Emacs 27 and later; uses only what ships with Emacs (`json-parse-string', or json.el where Emacs was built
;; without it).
;;
;; Flow: `cat' in a subprocess reads the FIFO (Emacs never blocks; the daemon's restarts do not end it, see
;; `speakbridge--spawn') -> each line is parsed (a JSON object from the `jsonl:' sink, or plain text from the
;; `fifo:' sink) -> a framed line whose seq is not above the last one taken for its (device, session) is dropped
;; (the daemon repeats at most one line after a crash) -> the chunk joins a queue -> the queue is inserted at
;; point of the selected window's buffer, one chunk at a time.  An insert that fails (read-only buffer, any error) keeps the
;; chunk at the head of the queue: it is retried every half second and on the next chunk, and nothing is lost.
;;
;; One space separates a chunk from the text before and after it where both sides are words: none at the start of
;; a line, after a space or an opening bracket, before a space or the end of the line, and never before punctuation
;; (`.', `,', `?'...).  Point ends right after the chunk.  A line break inside a chunk becomes a space; no line
;; break is ever added.

;;; Code:

(require 'json)

(defgroup speakbridge nil "Dictation from SpeakBridge." :group 'convenience)

(defun speakbridge--runtime-dir ()
  "The daemon's runtime directory, by the daemon's rule.
$XDG_RUNTIME_DIR/speakbridge; else /run/user/UID/speakbridge if that
directory is ours and private; else $XDG_STATE_HOME/speakbridge/run.
Never a name in /tmp, where another user could create the FIFO first."
  (let ((xdg (getenv "XDG_RUNTIME_DIR"))
        (state (getenv "XDG_STATE_HOME")))
    (if (and xdg (string-prefix-p "/" xdg))
        (expand-file-name "speakbridge" xdg)
      (let* ((run (format "/run/user/%d" (user-uid)))
             (attrs (file-attributes run 'integer)))
        (if (and attrs (eq (file-attribute-type attrs) t)
                 (eql (file-attribute-user-id attrs) (user-uid))
                 (equal (file-attribute-modes attrs) "drwx------"))
            (expand-file-name "speakbridge" run)
          (expand-file-name "speakbridge/run"
                            (if (and state (string-prefix-p "/" state)) state (expand-file-name "~/.local/state"))))))))

(defcustom speakbridge-fifo
  (expand-file-name "dictation.fifo" (speakbridge--runtime-dir))
  "The FIFO that `speakbridge serve --sink jsonl:PATH' writes to."
  :type 'file)

;; State kept for the whole Emacs session, across FIFO reopens and stop/start.
(defvar speakbridge--process nil)
(defvar speakbridge--stopping nil)
(defvar speakbridge--warned nil)
(defvar speakbridge--partial "")
(defvar speakbridge--taken (make-hash-table :test 'equal)
  "\"device\\nsession\" -> highest seq queued or inserted.")
(defvar speakbridge--queue nil "Texts read but not inserted yet, oldest first.")
(defvar speakbridge--inserted 0)
(defvar speakbridge--dropped 0)
(defvar speakbridge--last-error nil)
(defvar speakbridge--timer nil)

(defconst speakbridge--closing (string-to-list ".,;:!?)]}%…»›”’。，、！？：；）」』")
  "A chunk starting with one of these never gets a space before it.")
(defconst speakbridge--opening (string-to-list "([{“‘«‹¿¡（「『")
  "Text ending with one of these never gets a space after it.")

(defun speakbridge--needs-space (left right)
  "Whether a space belongs between the characters LEFT and RIGHT.
nil stands for the start or the end of a line."
  (and left right
       (not (memq left '(?\s ?\t ?\n ?\r ?\f)))
       (not (memq right '(?\s ?\t ?\n ?\r ?\f)))
       (not (memq left speakbridge--opening))
       (not (memq right speakbridge--closing))))

(defun speakbridge--target-buffer ()
  "The buffer of the selected window.
While the minibuffer is active: of the window selected before it."
  (let ((win (selected-window)))
    (when (and (window-minibuffer-p win) (minibuffer-selected-window))
      (setq win (minibuffer-selected-window)))
    (window-buffer win)))

(defun speakbridge--insert-text (text)
  "Insert TEXT at point of the target buffer with the separating spaces.
Signal an error when it cannot."
  (let ((text (replace-regexp-in-string "\r?\n" " " text)))
    (unless (equal text "")
      (with-current-buffer (speakbridge--target-buffer)
        (barf-if-buffer-read-only)
        (let ((before (unless (bolp) (char-before)))
              (after (unless (eolp) (char-after))))
          (when (speakbridge--needs-space before (aref text 0))
            (insert " "))
          (insert text)
          (when (speakbridge--needs-space (aref text (1- (length text))) after)
            (save-excursion (insert " "))))))))

(defun speakbridge--drain ()
  "Insert the queue in order.
Stop at the first failure and keep that chunk (and the rest) for a retry."
  (let ((failed nil))
    (while (and speakbridge--queue (not failed))
      (condition-case err
          (progn
            (speakbridge--insert-text (car speakbridge--queue))
            (setq speakbridge--queue (cdr speakbridge--queue))
            (setq speakbridge--inserted (1+ speakbridge--inserted)))
        (error
         (setq failed t)
         (let ((msg (error-message-string err)))
           (unless (equal msg speakbridge--last-error)
             (setq speakbridge--last-error msg)
             (message "speakbridge: %d chunk(s) held, not inserted: %s (retrying)"
                      (length speakbridge--queue) msg)))
         (unless speakbridge--timer
           (setq speakbridge--timer (run-with-timer 0.5 0.5 #'speakbridge--drain))))))
    (unless failed
      (when speakbridge--last-error
        (setq speakbridge--last-error nil)
        (message "speakbridge: held chunks inserted"))
      (when speakbridge--timer
        (cancel-timer speakbridge--timer)
        (setq speakbridge--timer nil)))))

(defun speakbridge--parse-json (string)
  "STRING parsed as a JSON object (an alist with symbol keys), or nil."
  (condition-case nil
      (if (fboundp 'json-parse-string)
          (json-parse-string string :object-type 'alist :null-object nil :false-object nil)
        (require 'json)
        (let ((json-object-type 'alist) (json-array-type 'vector) (json-key-type 'symbol))
          (json-read-from-string string)))
    (error nil)))

(defun speakbridge--frame (string)
  "A frame of the `jsonl:' sink in STRING (an alist), or nil.
A frame has string device, session and text and an integer seq >= 0."
  (let ((obj (speakbridge--parse-json string)))
    (when (and (consp obj) (consp (car obj)))
      (let ((device (alist-get 'device obj)) (session (alist-get 'session obj))
            (seq (alist-get 'seq obj)) (text (alist-get 'text obj)))
        (when (and (stringp device) (stringp session) (stringp text) (integerp seq) (>= seq 0))
          obj)))))

(defun speakbridge--take (line)
  "Queue the chunk in LINE unless it is a framed chunk already taken."
  (let ((obj (and (string-prefix-p "{" line) (speakbridge--frame line))))
    (unless obj
      ;; A line torn by a writer killed mid-line (longer than the atomic 4096 bytes) is followed by the whole
      ;; object; the torn part is repeated after the restart, so only the last object in the line counts.
      (let ((start (let ((case-fold-search nil) (pos nil) (from 1))
                     (while (setq from (string-match-p "{\"device\":" line from))
                       (setq pos from from (1+ from)))
                     pos)))
        (when start (setq obj (speakbridge--frame (substring line start))))))
    (if obj
        (let* ((key (concat (alist-get 'device obj) "\n" (alist-get 'session obj)))
               (seq (alist-get 'seq obj))
               (last (gethash key speakbridge--taken)))
          (if (and last (<= seq last))
              (setq speakbridge--dropped (1+ speakbridge--dropped))
            (puthash key seq speakbridge--taken)
            (setq speakbridge--queue (append speakbridge--queue (list (alist-get 'text obj))))))
      (unless (equal line "")
        ;; The plain `fifo:' sink: the line is the text.
        (setq speakbridge--queue (append speakbridge--queue (list line)))))))

(defun speakbridge--filter (_process output)
  "Take every complete line of OUTPUT, then insert what is queued."
  (let* ((text (concat speakbridge--partial output))
         (lines (split-string text "\n")))
    (setq speakbridge--partial (car (last lines)))
    (dolist (line (butlast lines))
      (condition-case nil
          (speakbridge--take line)
        ;; Never lose a line to a bug in parsing: insert it as it is.
        (error (setq speakbridge--queue (append speakbridge--queue (list line))))))
    (speakbridge--drain)))

(defun speakbridge--own-fifo-p (path)
  "Whether PATH is a FIFO of ours that nobody else may open (the daemon's rule)."
  (let ((attrs (file-attributes path 'integer)))
    (and attrs
         (eql (file-attribute-user-id attrs) (user-uid))
         (eq (aref (file-attribute-modes attrs) 0) ?p)
         (string-suffix-p "------" (file-attribute-modes attrs)))))

(defun speakbridge--spawn ()
  "Start the reader: `cat' on the FIFO opened read-write (`<>').
So the open never waits for the daemon and the daemon's restarts are no
end of file; `exec' makes the process cat itself, which Emacs ends when it
exits.  Retried a second later when the FIFO is not there yet or cat ends."
  (unless speakbridge--stopping
    (if (not (speakbridge--own-fifo-p speakbridge-fifo))
        (progn
          (unless speakbridge--warned
            (setq speakbridge--warned t)
            (message "speakbridge: %s is not a private FIFO yet; start `speakbridge serve --sink jsonl:%s' (waiting)"
                     speakbridge-fifo speakbridge-fifo))
          (run-with-timer 1 nil #'speakbridge--spawn))
      (setq speakbridge--warned nil)
      (setq speakbridge--process
            (make-process :name "speakbridge"
                          :command (list "sh" "-c" "[ -p \"$1\" ] && [ -O \"$1\" ] || exit 3; exec cat <>\"$1\""
                                         "sh" speakbridge-fifo)
                          :connection-type 'pipe
                          :coding 'utf-8-unix
                          :noquery t
                          :filter #'speakbridge--filter
                          :sentinel #'speakbridge--sentinel)))))

(defun speakbridge--sentinel (process _event)
  "Start the reader again a second after PROCESS ended, unless stopped."
  (when (and (eq process speakbridge--process) (not (process-live-p process)))
    (setq speakbridge--process nil)
    (unless speakbridge--stopping
      (run-with-timer 1 nil #'speakbridge--spawn))))

(defun speakbridge-start ()
  "Start inserting dictated text at point."
  (interactive)
  (unless (process-live-p speakbridge--process)
    (setq speakbridge--partial "" speakbridge--stopping nil speakbridge--warned nil)
    (speakbridge--spawn)
    (message "speakbridge: reading %s" speakbridge-fifo)))

(defun speakbridge-stop ()
  "Stop inserting dictated text (what is already read stays queued)."
  (interactive)
  (setq speakbridge--stopping t)
  (when (process-live-p speakbridge--process)
    (delete-process speakbridge--process))
  (setq speakbridge--process nil))

(defun speakbridge-status ()
  "What the plugin holds and has done, as a plist.
Shown in the echo area when called interactively."
  (interactive)
  (let ((status (list :reading (and (process-live-p speakbridge--process) t)
                      :held (length speakbridge--queue)
                      :inserted speakbridge--inserted
                      :dropped speakbridge--dropped
                      :error speakbridge--last-error)))
    (when (called-interactively-p 'interactive)
      (message "speakbridge: %S" status))
    status))

(provide 'speakbridge)
;;; speakbridge.el ends here
