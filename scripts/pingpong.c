#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <time.h>
#include <sys/wait.h>
#include <sys/resource.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static void rd(int fd,char*b,int n){int g=0;while(g<n){int r=read(fd,b+g,n-g);if(r<=0)exit(1);g+=r;}}
int main(int argc,char**argv){int unixs=argc>1&&argv[1][0]=='u';int N=100000,M=300;char buf[4096];memset(buf,1,sizeof buf);
 int l,c,s;
 if(unixs){struct sockaddr_un a={0};a.sun_family=AF_UNIX;strcpy(a.sun_path,"/tmp/uds/s");unlink(a.sun_path);l=socket(AF_UNIX,SOCK_STREAM,0);bind(l,(void*)&a,sizeof a);listen(l,1);
  if(fork()==0){c=socket(AF_UNIX,SOCK_STREAM,0);connect(c,(void*)&a,sizeof a);for(int i=0;i<N;i++){rd(c,buf,M);write(c,buf,M);}exit(0);} s=accept(l,0,0);}
 else{struct sockaddr_in a={0};a.sin_family=AF_INET;a.sin_port=htons(47123);a.sin_addr.s_addr=htonl(0x7f000001);l=socket(AF_INET,SOCK_STREAM,0);int one=1;setsockopt(l,SOL_SOCKET,SO_REUSEADDR,&one,4);bind(l,(void*)&a,sizeof a);listen(l,1);
  if(fork()==0){c=socket(AF_INET,SOCK_STREAM,0);connect(c,(void*)&a,sizeof a);setsockopt(c,IPPROTO_TCP,TCP_NODELAY,&one,4);for(int i=0;i<N;i++){rd(c,buf,M);write(c,buf,M);}exit(0);} s=accept(l,0,0);setsockopt(s,IPPROTO_TCP,TCP_NODELAY,&one,4);}
 double t=now();for(int i=0;i<N;i++){write(s,buf,M);rd(s,buf,M);}double e=now()-t;wait(0);
 struct rusage ru,rc;getrusage(RUSAGE_SELF,&ru);getrusage(RUSAGE_CHILDREN,&rc);
 double cpu=ru.ru_utime.tv_sec+ru.ru_stime.tv_sec+(ru.ru_utime.tv_usec+ru.ru_stime.tv_usec)/1e6+rc.ru_utime.tv_sec+rc.ru_stime.tv_sec+(rc.ru_utime.tv_usec+rc.ru_stime.tv_usec)/1e6;
 printf("%s: rtt %.1f us, cpu per message %.2f us\n",unixs?"unix":"tcp",e/N*1e6,cpu/(2.0*N)*1e6);}
