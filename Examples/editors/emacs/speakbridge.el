;;; speakbridge.el --- dictation from SpeakBridge's FIFO sink at point  -*- lexical-binding: t; -*-

;; Usage: (load "/path/to/Examples/editors/emacs/speakbridge.el")
;;        M-x speakbridge-start   (reads `speakbridge-fifo', default $XDG_RUNTIME_DIR/speakbridge/dictation.fifo)
;;        M-x speakbridge-stop
;; The daemon must run with `speakbridge serve --sink fifo:PATH'. Each line it writes (one chunk) is inserted at
;; point in the buffer that is current when it arrives, followed by `speakbridge-separator'.

;;; Code:

(defgroup speakbridge nil "Dictation from SpeakBridge." :group 'convenience)

(defun speakbridge--runtime-dir ()
  "The daemon's runtime directory, by the daemon's rule (never a name in /tmp, where another user could
create the FIFO first): $XDG_RUNTIME_DIR/speakbridge; else /run/user/UID/speakbridge if that directory is
ours and private; else $XDG_STATE_HOME/speakbridge/run."
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
  "The FIFO that `speakbridge serve --sink fifo:PATH' writes to."
  :type 'file)

(defcustom speakbridge-separator " "
  "Inserted after every chunk."
  :type 'string)

(defvar speakbridge--process nil)
(defvar speakbridge--partial "")

(defun speakbridge--filter (_process output)
  "Insert every complete line of OUTPUT at point."
  (let* ((text (concat speakbridge--partial output))
         (lines (split-string text "\n")))
    (setq speakbridge--partial (car (last lines)))
    (dolist (line (butlast lines))
      (unless (or (string-empty-p line) buffer-read-only)
        (insert line speakbridge-separator)))))

(defun speakbridge-start ()
  "Start inserting dictated text at point."
  (interactive)
  (unless (process-live-p speakbridge--process)
    (setq speakbridge--partial "")
    ;; A shell loop: cat ends whenever the daemon closes its end (e.g. on restart).
    (setq speakbridge--process
          (make-process :name "speakbridge"
                        :command (list "sh" "-c" "while :; do cat -- \"$1\" 2>/dev/null || sleep 1; done"
                                       "sh" speakbridge-fifo)
                        :connection-type 'pipe
                        :noquery t
                        :filter #'speakbridge--filter))
    (message "speakbridge: reading %s" speakbridge-fifo)))

(defun speakbridge-stop ()
  "Stop inserting dictated text."
  (interactive)
  (when (process-live-p speakbridge--process)
    (delete-process speakbridge--process))
  (setq speakbridge--process nil))

(provide 'speakbridge)
;;; speakbridge.el ends here
